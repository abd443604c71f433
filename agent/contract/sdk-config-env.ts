/**
 * Where the cloud SDKs in the agent look for config and credential files of their own: nowhere. The AWS
 * SDK reads ~/.aws/config and ~/.aws/credentials (an endpoint_url, a credential_process, a profile's
 * role), google-auth-library $CLOUDSDK_CONFIG (else ~/.config/gcloud)/application_default_credentials.json.
 * The agent takes its endpoints and identity from env the webhook renders; a file there, put by anyone
 * who could mount or write over the home directory, would redirect its signed requests. So HOME and
 * each SDK's file point under /nonexistent, which the image does not have and no mount of the agent
 * container covers (webhook/parse/agent-container-policy.ts AGENT_OWN_PATHS).
 *
 * Set twice: Dockerfile.agent's ENV (an image run without the webhook is safe too; a test checks they
 * match) and the env the webhook renders (an image that forgot them is safe too). The agent does not
 * force them itself: run outside Kubernetes (`node agent.js` on a laptop), ~/.aws is the user's own.
 */
export const NO_SDK_CONFIG_DIR = '/nonexistent';

export const SDK_CONFIG_ENV: Readonly<Record<string, string>> = {
  HOME: NO_SDK_CONFIG_DIR,
  AWS_CONFIG_FILE: `${NO_SDK_CONFIG_DIR}/.aws/config`,
  AWS_SHARED_CREDENTIALS_FILE: `${NO_SDK_CONFIG_DIR}/.aws/credentials`,
  CLOUDSDK_CONFIG: `${NO_SDK_CONFIG_DIR}/.config/gcloud`,
};
