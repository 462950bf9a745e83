/** Types of slow-first-sequencer.js (plain JavaScript: jest loads it before any transform). */
export declare const SLOW_FIRST: readonly string[];
declare const SlowFirstSequencer: unknown;
export default SlowFirstSequencer;
