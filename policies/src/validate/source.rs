//! A secret's source, checked: exactly one of `from: { env }`, `from: { file }` or a
//! literal `value`, none of them empty; a literal long enough to redact and, when it may
//! be swapped into a header, free of CR, LF and NUL.
//!
//! It owns the shape of the source only: it must never read the environment or a file
//! (that happens at launch, in [`crate::Policy::resolve`]), and never put a literal value
//! into a diagnostic: a literal is named by its secret and its length.

use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;
use sluice_guard::MIN_VALUE_LEN;
use zeroize::Zeroizing;

use super::{Ctx, Pos, push_at};
use crate::credentials::credential_shape;
use crate::error::Problem;
use crate::lint::{looks_random, reads_as_words};
use crate::model::{Literal, Source};
use crate::raw::RawSecret;

/// Checks and compiles a secret's source.
pub(super) fn compile(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    s: &RawSecret,
    base: &str,
    header_swap: bool,
    base_dir: Option<&Path>,
) -> Option<Source> {
    let n = &name.value;
    if let (Some(from), Some(value)) = (&s.from, &s.value) {
        let (first, second, at) = if from.referenced.line() <= value.referenced.line() {
            ("from", "value", Pos::of(value))
        } else {
            ("value", "from", Pos::of(from))
        };
        push_at(
            cx,
            at,
            base.to_owned(),
            Problem::TwoSources {
                secret: n.clone(),
                first,
                second,
            },
        );
        return None;
    }
    if let Some(from) = &s.from {
        return match (&from.value.env, &from.value.file) {
            (Some(_), Some(file)) => {
                cx.at(
                    file,
                    format!("{base}.from"),
                    Problem::TwoSources {
                        secret: n.clone(),
                        first: "env",
                        second: "file",
                    },
                );
                None
            }
            (None, None) => {
                cx.at(
                    from,
                    format!("{base}.from"),
                    Problem::NoSource { secret: n.clone() },
                );
                None
            }
            (Some(env), None) if env.value.trim().is_empty() => {
                cx.at(
                    env,
                    format!("{base}.from.env"),
                    Problem::EmptySource {
                        secret: n.clone(),
                        key: "env",
                        what: "variable name",
                    },
                );
                None
            }
            (Some(env), None) => Some(Source::Env(env.value.clone())),
            (None, Some(file)) if file.value.trim().is_empty() => {
                cx.at(
                    file,
                    format!("{base}.from.file"),
                    Problem::EmptySource {
                        secret: n.clone(),
                        key: "file",
                        what: "path",
                    },
                );
                None
            }
            (None, Some(file)) => {
                let path = PathBuf::from(&file.value);
                let path = match base_dir {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path,
                };
                Some(Source::File(path))
            }
        };
    }
    if let Some(value) = &s.value {
        let path = format!("{base}.value");
        let bytes = value.value.0.as_bytes();
        let mut ok = true;
        if bytes.len() < MIN_VALUE_LEN {
            cx.at(
                value,
                path.clone(),
                Problem::ValueTooShort {
                    secret: n.clone(),
                    len: bytes.len(),
                    min: MIN_VALUE_LEN,
                },
            );
            ok = false;
        }
        if header_swap && let Some(byte) = header_unfit_byte(bytes) {
            cx.at(
                value,
                path.clone(),
                Problem::ValueUnfitForHeader {
                    secret: n.clone(),
                    byte,
                },
            );
            ok = false;
        }
        if let Some(shape) = credential_shape(bytes) {
            cx.at(
                value,
                path,
                Problem::CredentialLiteral {
                    secret: n.clone(),
                    shape: shape.to_string(),
                },
            );
            ok = false;
        } else if reads_as_words(&value.value.0) {
            cx.at(value, path, Problem::CommonWordValue { secret: n.clone() });
        } else {
            let why = looks_random(&value.value.0)
                .map(|w| format!(", and {w}"))
                .unwrap_or_default();
            cx.at(
                value,
                path,
                Problem::LiteralValue {
                    secret: n.clone(),
                    why,
                },
            );
        }
        return ok.then(|| Source::Literal(Literal(Zeroizing::new(bytes.to_vec()))));
    }
    cx.at(
        name,
        base.to_owned(),
        Problem::NoSource { secret: n.clone() },
    );
    None
}

/// The first byte that cannot appear in a header value: `CR`, `LF` or `NUL`.
pub(crate) fn header_unfit_byte(bytes: &[u8]) -> Option<&'static str> {
    bytes.iter().find_map(|b| match b {
        b'\r' => Some("CR"),
        b'\n' => Some("LF"),
        0 => Some("NUL"),
        _ => None,
    })
}
