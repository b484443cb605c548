//! The guard: one Aho-Corasick automaton over a run's placeholders and known secret values,
//! and the exact streaming rewriter built on it.
//!
//! sluice hands the sandbox placeholders instead of secrets. Everything that crosses sluice is
//! scanned once by this guard, which finds every placeholder and every known value (raw,
//! percent-encoded, JSON-escaped, base64 at every alignment, hex). What a match becomes is
//! said by a [`Plan`] that the caller fills from the grant decision:
//!
//! - outbound, a placeholder is swapped for its value where granted, refused elsewhere, or
//!   kept on a verbatim host; a real value is kept toward a granted host, refused elsewhere;
//! - inbound (responses, a child's output), every value is redacted to its placeholder.
//!
//! # What this crate never does
//! No I/O, no async, no logging, no randomness: it is a pure library that the proxy and the
//! launcher both use. It decides no grant (that is `sluice-policies`) and never prints a
//! secret value: values live in [`zeroize`]d memory, and `Debug` shows names and sizes only.
//!
//! # Overview
//! - [`Placeholder`], [`SecretValue`]: what a secret is made of.
//! - [`GuardBuilder`] → [`Guard`]: the automaton, behind a q-gram prefilter that skips text
//!   where no pattern can occur; [`Guard::find_iter`] reports [`Hit`]s.
//! - [`Plan`]: per-secret [`OnPlaceholder`] / [`OnValue`] actions, and the [`SwapForm`] that a
//!   swapped value is written in.
//! - [`Guard::rewrite`], [`Guard::redact`] (and `_into` twins that append to a caller's
//!   buffer): one-shot, with [`Rewritten::absorb`] and [`Rewritten::splice`] for a caller
//!   that decodes a part itself (the proxy, inside HTTP `Basic` credentials);
//!   [`Rewriter`]: streaming, exact whatever the chunking.
//! - [`Tally`]: what was swapped, redacted and kept, per secret, for the audit log.
//! - [`GuardError`]: every failure; [`RefusedMatch`] names what a plan refused.
//!
//! # Example: swap outbound, redact inbound
//! ```
//! use std::sync::Arc;
//! use sluice_guard::{Guard, OnPlaceholder, OnValue, Placeholder, Plan, Rewriter, SecretValue};
//!
//! let mut builder = Guard::builder();
//! let token = builder.add(
//!     "github_token",
//!     Placeholder::mint("github_token", &[0x2a; 12]), // the nonce comes from a CSPRNG
//!     SecretValue::from("ghp_real_value_0123456789"),
//! )?;
//! let guard = Arc::new(builder.build()?);
//! let placeholder = guard.placeholder(token).to_string();
//!
//! // Toward a host and location the secret grants: the placeholder becomes the value.
//! let mut granted = Plan::refuse_all(&guard);
//! granted.set(token, OnPlaceholder::Swap, OnValue::Keep);
//! let header = format!("Bearer {placeholder}");
//! let out = guard.rewrite(header.as_bytes(), &granted)?;
//! assert_eq!(out.bytes(), b"Bearer ghp_real_value_0123456789");
//!
//! // Anywhere else: refused, naming the secret.
//! let refused = guard.rewrite(header.as_bytes(), &Plan::refuse_all(&guard));
//! assert!(refused.unwrap_err().to_string().contains("github_token"));
//!
//! // Back toward the sandbox: the value is redacted, whatever the chunking.
//! let mut redactor = Rewriter::redactor(Arc::clone(&guard));
//! let mut shown = Vec::new();
//! redactor.push(b"{\"token\":\"ghp_real_val", &mut shown)?;
//! redactor.push(b"ue_0123456789\"}", &mut shown)?;
//! let tally = redactor.finish(&mut shown)?;
//! assert_eq!(shown, format!("{{\"token\":\"{placeholder}\"}}").into_bytes());
//! assert_eq!(tally.get(token).redacted, 1);
//! # Ok::<(), sluice_guard::GuardError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod encoding;
mod error;
mod guard;
mod plan;
mod prefilter;
mod rewrite;
mod search;
mod secret;

pub use encoding::{Base64Alphabet, Encoding, JsonStyle, PercentStyle, SwapForm};
pub use error::{GuardError, RefusedMatch};
pub use guard::{Form, Guard, GuardBuilder, Hit, MAX_SECRETS};
pub use plan::{OnPlaceholder, OnValue, Plan};
pub use rewrite::{Counts, Rewriter, Rewritten, Tally};
pub use secret::{
    MAX_PLACEHOLDER_LEN, MAX_VALUE_LEN, MIN_PLACEHOLDER_LEN, MIN_VALUE_LEN, NONCE_LEN, Placeholder,
    SecretId, SecretValue,
};

// The proxy shares one guard across connections and moves rewriters between tasks.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Guard>();
    send_sync::<Rewriter>();
    send_sync::<Plan>();
};
