//! Keys written with no value (`in:`, `header:`, `hosts:` followed by nothing, or `null`):
//! each an error at the key, since the typed model would read them as absent and give the
//! default (`in:` would become `[header]`, `header:` any header). A typo must not read as
//! the default.
//!
//! The pass reads the file's shape only: mapping keys, and whether each value is null. It
//! keeps no scalar, so a literal secret value is never copied here.

use std::fmt;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::Ctx;
use crate::error::Problem;

/// A node of the file: a mapping, a sequence, null, or some scalar (not kept).
enum Node {
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Null,
    Scalar,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Scalar)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }

    fn visit_str<E>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Scalar)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        loop {
            // A key that is not a string is the typed model's to refuse.
            match map.next_key::<Spanned<String>>() {
                Ok(Some(key)) => entries.push((key, map.next_value()?)),
                Ok(None) => break,
                Err(_) => {
                    let _ = map.next_value::<IgnoredAny>();
                }
            }
        }
        Ok(Node::Map(entries))
    }
}

/// Reports every key of `source` written with no value. A file that does not parse is
/// the typed model's to report.
pub(super) fn empty_keys(cx: &mut Ctx<'_>, source: &str) {
    if let Ok(root) = serde_saphyr::from_str::<Spanned<Node>>(source) {
        walk(cx, &root.value, "");
    }
}

fn walk(cx: &mut Ctx<'_>, node: &Node, path: &str) {
    match node {
        Node::Map(entries) => {
            for (key, value) in entries {
                let path = if path.is_empty() {
                    key.value.clone()
                } else {
                    format!("{path}.{}", key.value)
                };
                if matches!(value.value, Node::Null) {
                    cx.at(key, path.clone(), Problem::NoValue { key: path });
                } else {
                    walk(cx, &value.value, &path);
                }
            }
        }
        Node::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(cx, &item.value, &format!("{path}[{i}]"));
            }
        }
        Node::Null | Node::Scalar => {}
    }
}
