/**
 * Which POS APIs sandbox points at the simulator's fakes (src/sandbox.ts withSandboxPosApis): each
 * POS of SANDBOX_POS_APIS whose variable the operator did not set, at the fake's base path; a POS
 * listed without an API address variable is a programming error, said at start-up.
 */
import { describe, expect, it } from '@jest/globals';
import { posSettingDeclarations } from '../adapters/index.js';
import { loadConfig } from '../src/config.js';
import { SANDBOX_POS_APIS, withSandboxPosApis } from '../src/sandbox.js';
import { POS_API_BASE_PATHS } from '../simulator/index.js';

const SIM = 'http://127.0.0.1:4100';

describe('sandbox: POS API base URLs', () => {
  const config = loadConfig(posSettingDeclarations, { SQUARE_API_BASE_URL: 'https://connect.squareupsandbox.com' });

  it('points each listed POS whose variable is unset at the simulator, and leaves a set one and every other POS alone', () => {
    const { pos, pointed } = withSandboxPosApis(config.pos, posSettingDeclarations, SIM, (variable) => variable === 'SQUARE_API_BASE_URL');
    expect(SANDBOX_POS_APIS).toEqual(expect.arrayContaining(['square', 'clover', 'loyverse']));
    expect(pointed).toEqual(Object.fromEntries(SANDBOX_POS_APIS.filter((name) => name !== 'square').map((name) => [name, `${SIM}${POS_API_BASE_PATHS[name]}`])));
    expect(pos.square!.apiBaseUrl).toBe('https://connect.squareupsandbox.com');
    expect(pos.clover).toEqual({ ...config.pos.clover, apiBaseUrl: `${SIM}/clover` });
    expect(pos.loyverse!.apiBaseUrl).toBe(`${SIM}/loyverse`);
    for (const other of Object.keys(config.pos).filter((name) => !(SANDBOX_POS_APIS as readonly string[]).includes(name))) expect(pos[other]).toBe(config.pos[other]);
    // The configuration it was given is not changed.
    expect(config.pos.clover!.apiBaseUrl).toBe('https://api.clover.com');
  });

  it('refuses a listed POS that declares no API base URL variable, naming it', () => {
    const declarations = { ...posSettingDeclarations, loyverse: { ...posSettingDeclarations.loyverse, apiBaseUrl: undefined } };
    expect(() => withSandboxPosApis(config.pos, declarations, SIM, () => false)).toThrow("sandbox points loyverse's API at the simulator, but loyverse declares no API base URL variable");
  });
});
