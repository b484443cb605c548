//! A secret's source, checked: exactly one of `from: { env }`, `from: { file }`,
//! `from: { command }` or a literal `value`, none of them empty; a literal long enough to redact and, when it may
//! be swapped into a header, free of CR, LF and NUL.
//!
//! It owns the shape of the source only: it must never read the environment or a file, or
//! run a command
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
use crate::raw::{RawSecret, SpannedList};

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
        let parts = [
            (
                "access_key_id",
                from.value.access_key_id.as_ref().map(Pos::of),
            ),
            (
                "secret_access_key",
                from.value.secret_access_key.as_ref().map(Pos::of),
            ),
            (
                "session_token",
                from.value.session_token.as_ref().map(Pos::of),
            ),
        ];
        let mut ok = true;
        for (part, at) in parts {
            if let Some(at) = at {
                push_at(
                    cx,
                    at,
                    format!("{base}.from.{part}"),
                    Problem::OnlyForSigning {
                        secret: n.clone(),
                        key: format!("from.{part}"),
                    },
                );
                ok = false;
            }
        }
        let at = Pos::of(from);
        let sources = Sources {
            env: from.value.env.as_ref(),
            file: from.value.file.as_ref(),
            command: from.value.command.as_ref(),
        };
        let source = one_source(cx, n, &sources, at, &format!("{base}.from"), base_dir);
        return source.filter(|_| ok);
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

/// The sources one `from:` may name; exactly one must be given.
pub(super) struct Sources<'a> {
    pub(super) env: Option<&'a Spanned<String>>,
    pub(super) file: Option<&'a Spanned<String>>,
    pub(super) command: Option<&'a SpannedList>,
}

/// `from: { env: VAR }`, `from: { file: PATH }` or `from: { command: [ARGV...] }` (exactly
/// one, not empty) at `path`, with a relative file taken from `base_dir`.
pub(super) fn one_source(
    cx: &mut Ctx<'_>,
    secret: &str,
    sources: &Sources<'_>,
    at: Pos,
    path: &str,
    base_dir: Option<&Path>,
) -> Option<Source> {
    let secret = secret.to_owned();
    let given: Vec<(&'static str, Pos)> = [
        ("env", sources.env.map(Pos::of)),
        ("file", sources.file.map(Pos::of)),
        ("command", sources.command.map(Pos::of)),
    ]
    .into_iter()
    .filter_map(|(key, pos)| pos.map(|pos| (key, pos)))
    .collect();
    match given.as_slice() {
        [] => {
            push_at(cx, at, path.to_owned(), Problem::NoSource { secret });
            return None;
        }
        [(first, _), (second, pos), ..] => {
            push_at(
                cx,
                *pos,
                path.to_owned(),
                Problem::TwoSources {
                    secret,
                    first,
                    second,
                },
            );
            return None;
        }
        [_] => {}
    }
    let empty = |cx: &mut Ctx<'_>, pos: Pos, key: &'static str, what: &'static str| {
        push_at(
            cx,
            pos,
            format!("{path}.{key}"),
            Problem::EmptySource {
                secret: secret.clone(),
                key,
                what,
            },
        );
        None
    };
    if let Some(env) = sources.env {
        if env.value.trim().is_empty() {
            return empty(cx, Pos::of(env), "env", "variable name");
        }
        return Some(Source::Env(env.value.clone()));
    }
    if let Some(file) = sources.file {
        if file.value.trim().is_empty() {
            return empty(cx, Pos::of(file), "file", "path");
        }
        let file = PathBuf::from(&file.value);
        return Some(Source::File(match base_dir {
            Some(dir) if file.is_relative() => dir.join(file),
            _ => file,
        }));
    }
    let command = sources.command?;
    match command.value.first() {
        None => empty(
            cx,
            Pos::of(command),
            "command",
            "program and its arguments, e.g. [op, read, \"op://vault/item/field\"]",
        ),
        Some(program) if program.value.trim().is_empty() => {
            empty(cx, Pos::of(program), "command", "program name first")
        }
        Some(_) => Some(Source::Command(
            command.value.iter().map(|arg| arg.value.clone()).collect(),
        )),
    }
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
