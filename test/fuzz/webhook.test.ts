import { describePinnedShare } from './pinned-share.ts';

describePinnedShare('webhook', 'fuzz (seed-pinned share): the webhook over HTTPS');
