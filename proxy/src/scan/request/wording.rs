//! Why a match was refused, in one line a person or an agent can act on: the secret, the
//! place, the host and the grant that would allow it, as the grant decision words it. Never
//! the value.

use sluice_guard::{Form, GuardError};
use sluice_policies::{Location, RequestLine, Sink, Ungranted};

use crate::refusal::{Code, Refusal};

use super::{Outbound, Place};

impl Outbound<'_> {
    /// The refusal sent back for a refused match: names the secret, the place, the host and
    /// the grant that would allow it. Never the value.
    pub(crate) fn refusal(&self, error: GuardError, place: &Place) -> Refusal {
        let GuardError::Refused(refused) = error else {
            return Refusal::bad_request(format!(
                "sluice could not scan the {}: {error}",
                place.label()
            ));
        };
        let (host, port) = (self.target.host.as_str(), self.target.port);
        let secret = refused.name.as_str();
        let target = self.target.authority();
        match refused.form {
            Form::Placeholder => {
                let mut code = Code::PlaceholderNotGranted;
                let why = match place.location() {
                    _ if self.plain => {
                        "placeholders are never swapped into plain http:// requests; use https://"
                            .to_owned()
                    }
                    Some(location) => match self.ungranted(secret, &location) {
                        Some(refusal) => {
                            if let Ungranted::RequestNotAllowed { .. } = refusal {
                                code = Code::RequestNotAllowed;
                            }
                            refusal.to_string()
                        }
                        None => "the grant was withdrawn".into(),
                    },
                    None => format!(
                        "placeholders are swapped only in headers, the query or the body, never in the {}",
                        place.label()
                    ),
                };
                Refusal::secret_refused(
                    code,
                    format!(
                        "sluice refused the request to {target}: placeholder of secret {secret} in {}: {why}",
                        place.label()
                    ),
                    secret,
                    place.label(),
                )
            }
            Form::Value(encoding) => {
                let why = match self.policy.may_reach(secret, host, port) {
                    _ if self.plain => "a secret value never leaves in plain http://".to_owned(),
                    Err(refusal) => refusal.to_string(),
                    Ok(_) => "the grant was withdrawn".into(),
                };
                Refusal::secret_refused(
                    Code::SecretValueRefused,
                    format!(
                        "sluice refused the request to {target}: the real value of secret {secret} ({} form) in {}: {why}",
                        encoding.family(),
                        place.label()
                    ),
                    secret,
                    place.label(),
                )
            }
        }
    }
    /// Why `secret` may not be swapped at `location` in this request, as the grant
    /// decision words it: the whole of [`sluice_policies::Policy::may`] when the request rules were weighed.
    fn ungranted(&self, secret: &str, location: &Location) -> Option<Ungranted> {
        let (host, port) = (self.target.host.as_str(), self.target.port);
        let decided = match &self.ruled {
            Some(ruled) => {
                let line = RequestLine::new(&ruled.method, &ruled.path);
                self.policy
                    .may(secret, Sink::Egress, host, port, location, &line)
            }
            None => self
                .policy
                .may_place(secret, Sink::Egress, host, port, location),
        };
        decided.err()
    }
}
