import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { ConfigError } from '../../agent/contract/errors.ts';

/**
 * A command's flags, strict, with positionals allowed for the command to refuse by name; parseArgs'
 * own error becomes a ConfigError on `arguments` (its first sentence names the flag; the rest is
 * about positionals after `--`), with `seeHelp` as the fix.
 */
export function parseCommandArgs<T extends ParseArgsOptionsConfig>(
  args: readonly string[],
  options: T,
  seeHelp: string,
) {
  try {
    return parseArgs({ args: [...args], strict: true, allowPositionals: true, options });
  } catch (e) {
    throw new ConfigError('arguments', (e as Error).message.split(/\.(?: |$)/)[0]!, seeHelp);
  }
}
