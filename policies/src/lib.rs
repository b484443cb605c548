//! The declaration: what each secret may do, and where.
#![forbid(unsafe_code)]
