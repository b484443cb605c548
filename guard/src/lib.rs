//! The guard: one Aho-Corasick guard over placeholders and known secret values.
#![forbid(unsafe_code)]
