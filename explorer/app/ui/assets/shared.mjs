// @ts-check
// Written by explorer/figures/page_constants.py: the constants the page shares with the server.
// Not edited by hand: change them there, write this again, rebuild the component.

/** The wire format's version (figures/codec.py WIRE_VERSION). */
export const VERSION = 1;

/** Where a token's tick label ends and its hover part goes on. */
export const SHORT_END = "\u2063";
