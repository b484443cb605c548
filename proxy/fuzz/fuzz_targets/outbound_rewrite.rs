//! The request scan on any request head, body and trailers, toward each kind of host of one
//! small declaration: it never panics, and it never forwards a real secret value toward a
//! host that secret's declaration does not grant. The harness is the crate's own
//! (`proxy/src/fuzzing/`, compiled under `cfg(fuzzing)`), so it calls the steps `forward`
//! calls, and nothing of them needs to be public.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_proxy::fuzzing::outbound_rewrite(data));
