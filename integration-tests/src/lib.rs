//! Shared helpers for sluice's end-to-end tests.
#![forbid(unsafe_code)]
