//! The plan: what a rewrite does with each secret's placeholder and value.
//!
//! This module owns the per-secret actions for one place in one message (a request header
//! toward one host, a response body, a child's stdout). It decides nothing itself: the caller
//! fills it from the grant decision (`sluice-policies`), and unknown means refuse.

use crate::{Guard, SecretId, SwapForm};

/// What to do with a secret's placeholder when it is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnPlaceholder {
    /// Leave it as it is (an `egress.verbatim` host, or a response).
    Keep,
    /// Write the real value in its place (a granted host and location).
    Swap,
    /// Refuse the whole message.
    Refuse,
}

/// What to do with a secret's real value (in any encoding) when it is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OnValue {
    /// Leave it as it is (outbound, toward a host the secret grants).
    Keep,
    /// Write the placeholder in its place (responses, a child's output).
    Redact,
    /// Refuse the whole message (outbound, toward a host the secret does not grant).
    Refuse,
}

/// Per-secret actions for one rewrite.
///
/// # Defaults
/// [`Plan::refuse_all`] refuses every placeholder and every value: fill in what is granted.
/// An id the plan has no entry for (one from a bigger guard) is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    placeholders: Vec<OnPlaceholder>,
    values: Vec<OnValue>,
    swap_form: SwapForm,
}

impl Plan {
    /// Every placeholder and every value refused; swaps written raw.
    pub fn refuse_all(guard: &Guard) -> Self {
        Self {
            placeholders: vec![OnPlaceholder::Refuse; guard.len()],
            values: vec![OnValue::Refuse; guard.len()],
            swap_form: SwapForm::Raw,
        }
    }

    /// The plan for everything that flows back to the sandbox: every value redacted to its
    /// placeholder, placeholders left as they are.
    pub fn redact_all(guard: &Guard) -> Self {
        Self {
            placeholders: vec![OnPlaceholder::Keep; guard.len()],
            values: vec![OnValue::Redact; guard.len()],
            swap_form: SwapForm::Raw,
        }
    }

    /// Sets both actions for one secret.
    pub fn set(&mut self, id: SecretId, placeholder: OnPlaceholder, value: OnValue) -> &mut Self {
        let i = id.index();
        if i >= self.placeholders.len() {
            self.placeholders.resize(i + 1, OnPlaceholder::Refuse);
            self.values.resize(i + 1, OnValue::Refuse);
        }
        self.placeholders[i] = placeholder;
        self.values[i] = value;
        self
    }

    /// Sets the form swapped values are written in (raw by default).
    pub fn with_swap_form(mut self, form: SwapForm) -> Self {
        self.swap_form = form;
        self
    }

    /// The form swapped values are written in.
    pub fn swap_form(&self) -> SwapForm {
        self.swap_form
    }

    /// The same plan for a message whose bytes may not change (a signed aws-chunked body,
    /// whose lengths are signed): every swap and every redaction becomes a refusal, so that
    /// what passes passes exactly as it came.
    pub fn keeping_length(&self) -> Self {
        Self {
            placeholders: self
                .placeholders
                .iter()
                .map(|&a| match a {
                    OnPlaceholder::Swap => OnPlaceholder::Refuse,
                    other => other,
                })
                .collect(),
            values: self
                .values
                .iter()
                .map(|&a| match a {
                    OnValue::Redact => OnValue::Refuse,
                    other => other,
                })
                .collect(),
            swap_form: self.swap_form,
        }
    }

    /// What happens to this secret's placeholder.
    pub fn on_placeholder(&self, id: SecretId) -> OnPlaceholder {
        self.placeholders
            .get(id.index())
            .copied()
            .unwrap_or(OnPlaceholder::Refuse)
    }

    /// What happens to this secret's value.
    pub fn on_value(&self, id: SecretId) -> OnValue {
        self.values
            .get(id.index())
            .copied()
            .unwrap_or(OnValue::Refuse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NONCE_LEN, Placeholder, SecretValue};

    #[test]
    fn unknown_ids_are_refused_and_set_grows_the_plan() {
        let empty = Guard::builder().build().unwrap();
        let mut b = Guard::builder();
        let id = b
            .add(
                "t",
                Placeholder::mint("t", &[1; NONCE_LEN]),
                SecretValue::from("abcdefghij"),
            )
            .unwrap();
        let mut plan = Plan::refuse_all(&empty);
        assert_eq!(plan.on_placeholder(id), OnPlaceholder::Refuse);
        assert_eq!(plan.on_value(id), OnValue::Refuse);
        plan.set(id, OnPlaceholder::Swap, OnValue::Keep);
        assert_eq!(plan.on_placeholder(id), OnPlaceholder::Swap);
        assert_eq!(plan.on_value(id), OnValue::Keep);
    }

    #[test]
    fn a_plan_keeping_length_refuses_what_would_change_a_byte_and_keeps_the_rest() {
        let mut b = Guard::builder();
        let swapped = b
            .add(
                "s",
                Placeholder::mint("s", &[1; NONCE_LEN]),
                SecretValue::from("abcdefghij"),
            )
            .unwrap();
        let kept = b
            .add(
                "k",
                Placeholder::mint("k", &[2; NONCE_LEN]),
                SecretValue::from("klmnopqrst"),
            )
            .unwrap();
        let g = b.build().unwrap();
        let mut plan = Plan::refuse_all(&g);
        plan.set(swapped, OnPlaceholder::Swap, OnValue::Redact);
        plan.set(kept, OnPlaceholder::Keep, OnValue::Keep);
        let plan = plan.keeping_length();
        assert_eq!(plan.on_placeholder(swapped), OnPlaceholder::Refuse);
        assert_eq!(plan.on_value(swapped), OnValue::Refuse);
        assert_eq!(plan.on_placeholder(kept), OnPlaceholder::Keep);
        assert_eq!(plan.on_value(kept), OnValue::Keep);
    }

    #[test]
    fn redact_all_keeps_placeholders_and_redacts_values() {
        let mut b = Guard::builder();
        let id = b
            .add(
                "t",
                Placeholder::mint("t", &[1; NONCE_LEN]),
                SecretValue::from("abcdefghij"),
            )
            .unwrap();
        let g = b.build().unwrap();
        let plan = Plan::redact_all(&g).with_swap_form(SwapForm::Json);
        assert_eq!(plan.on_placeholder(id), OnPlaceholder::Keep);
        assert_eq!(plan.on_value(id), OnValue::Redact);
        assert_eq!(plan.swap_form(), SwapForm::Json);
    }
}
