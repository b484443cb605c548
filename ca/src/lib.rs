//! The run-scoped CA.
#![forbid(unsafe_code)]
