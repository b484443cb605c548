//! The audit log.
