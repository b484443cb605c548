//! The parsers of minted credentials on any bytes: a token endpoint's answer (never a
//! panic, a failure always a fixed code, never the answer's words) and the sandbox's own
//! token request (admitted only with a placeholder it holds). The harness is the crate's
//! own (`proxy/src/fuzzing/token.rs`, compiled under `cfg(fuzzing)`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_proxy::fuzzing::token_exchange(data));
