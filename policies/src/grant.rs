//! The grant decision: may this secret's real value go to this sink, host and place?
//! One function, shared by the proxy and the launcher, so the rule is written once.
//!
//! A refusal names the secret, the host and the missing grant in words an agent can act
//! on; it never holds a value. Unknown means refuse.

use crate::host::normalize_host;
use crate::model::{Location, Sink};
use crate::policy::Policy;
use crate::rules::RequestLine;

/// A granted use of a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permit {
    /// Index of the secret in [`Policy::secrets`].
    pub secret_index: usize,
    /// The sink granted.
    pub sink: Sink,
}

/// A refused use of a secret, and the grant that would allow it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Ungranted {
    /// No secret of that name is declared.
    #[error("no secret named {secret} is declared; add it under secrets:")]
    UnknownSecret {
        /// The name asked for.
        secret: String,
    },
    /// The secret is redact-only (`sinks: []`).
    #[error(
        "secret {secret} is redact-only (sinks: []) and is never swapped; add {sink} to secrets.{secret}.sinks to allow it"
    )]
    RedactOnly {
        /// The secret.
        secret: String,
        /// The sink asked for.
        sink: Sink,
    },
    /// The secret is not granted this sink.
    #[error("secret {secret} is not granted the {sink} sink; add {sink} to secrets.{secret}.sinks")]
    SinkNotGranted {
        /// The secret.
        secret: String,
        /// The sink asked for.
        sink: Sink,
    },
    /// The host is not a valid host name.
    #[error("host `{host}` is not a valid host name, so secret {secret} is not sent there")]
    InvalidHost {
        /// The secret.
        secret: String,
        /// The host as given.
        host: String,
    },
    /// The secret is not granted toward this host and port.
    #[error(
        "secret {secret} is not granted to host {host} (port {port}); add it to secrets.{secret}.hosts"
    )]
    HostNotGranted {
        /// The secret.
        secret: String,
        /// The normalised host.
        host: String,
        /// The port.
        port: u16,
    },
    /// The host is passthrough: never inspected, so never swapped.
    #[error(
        "host {host} is passthrough (tunnelled without inspection), so secret {secret} is never swapped there; remove it from egress.passthrough"
    )]
    Passthrough {
        /// The secret.
        secret: String,
        /// The normalised host.
        host: String,
    },
    /// The secret may not be placed in this part of the request.
    #[error(
        "secret {secret} may not be placed in the {place} toward {host}; add {place} to secrets.{secret}.in"
    )]
    PlaceNotGranted {
        /// The secret.
        secret: String,
        /// The normalised host.
        host: String,
        /// `header`, `query` or `body`.
        place: &'static str,
    },
    /// The secret signs requests (`sign:`) and is never placed in one.
    #[error(
        "secret {secret} signs requests (sign: {kind}) and is never placed in one toward {host}: its placeholders belong only in a signature, which sluice verifies and signs again"
    )]
    SignsOnly {
        /// The signing secret.
        secret: String,
        /// Its kind.
        kind: &'static str,
        /// The normalised host.
        host: String,
    },
    /// The signing secret is not granted this service.
    #[error(
        "secret {secret} may not sign for service {service}; add {service} to secrets.{secret}.services"
    )]
    ServiceNotGranted {
        /// The signing secret.
        secret: String,
        /// The service the request's credential scope names.
        service: String,
    },
    /// The signing secret is not granted this region.
    #[error(
        "secret {secret} may not sign for region {region}; add {region} to secrets.{secret}.regions"
    )]
    RegionNotGranted {
        /// The signing secret.
        secret: String,
        /// The region the request's credential scope names.
        region: String,
    },
    /// No rule of the secret's `allow:` admits this request's method and path.
    #[error("secret {secret} may not be swapped into {method} {path} toward {host}: {fix}")]
    RequestNotAllowed {
        /// The secret.
        secret: String,
        /// The normalised host.
        host: String,
        /// The request's method.
        method: String,
        /// The request's normalised path (never its query).
        path: String,
        /// The change to `allow:` that would admit it.
        fix: String,
    },
    /// The secret may go in headers, but not this one.
    #[error(
        "secret {secret} may not be placed in header {header} toward {host}; add {header} to secrets.{secret}.header"
    )]
    HeaderNotGranted {
        /// The secret.
        secret: String,
        /// The normalised host.
        host: String,
        /// The header name, lowercased.
        header: String,
    },
}

impl Ungranted {
    /// A short stable code for audit logs and `sluice-error` headers.
    pub fn code(&self) -> &'static str {
        match self {
            Ungranted::UnknownSecret { .. } => "unknown_secret",
            Ungranted::RedactOnly { .. } => "redact_only",
            Ungranted::SinkNotGranted { .. } => "sink_not_granted",
            Ungranted::InvalidHost { .. } => "invalid_host",
            Ungranted::HostNotGranted { .. } => "host_not_granted",
            Ungranted::Passthrough { .. } => "passthrough_host",
            Ungranted::PlaceNotGranted { .. } => "location_not_granted",
            Ungranted::HeaderNotGranted { .. } => "header_not_granted",
            Ungranted::RequestNotAllowed { .. } => "request_not_allowed",
            Ungranted::SignsOnly { .. } => "signing_secret",
            Ungranted::ServiceNotGranted { .. } => "service_not_granted",
            Ungranted::RegionNotGranted { .. } => "region_not_granted",
        }
    }
}

impl Policy {
    /// The grant decision: may `secret`'s real value go to `sink`?
    ///
    /// For [`Sink::Egress`], `host` (normalised here) and `port` must match one of the
    /// secret's hosts, the host must not be passthrough, `location` must be in the
    /// secret's `in:` (and, for a header, in `header:` when given), and one of its
    /// `allow:` rules, when it has them, must admit the request's method and path. For
    /// every other sink only the sink is checked; the rest is ignored.
    ///
    /// # Errors
    ///
    /// A [`Ungranted`] naming the missing grant.
    pub fn may(
        &self,
        secret: &str,
        sink: Sink,
        host: &str,
        port: u16,
        location: &Location,
        request: &RequestLine<'_>,
    ) -> Result<Permit, Ungranted> {
        let permit = self.may_place(secret, sink, host, port, location)?;
        if sink == Sink::Egress {
            self.may_request(permit.secret_index, host, request)?;
        }
        Ok(permit)
    }

    /// [`Policy::may`] short of the request rules: everything that is the same for every
    /// request toward one host, which the proxy decides once per tunnel and completes with
    /// [`Policy::may_request`] per request.
    ///
    /// # Errors
    ///
    /// As [`Policy::may`], but never [`Ungranted::RequestNotAllowed`].
    pub fn may_place(
        &self,
        secret: &str,
        sink: Sink,
        host: &str,
        port: u16,
        location: &Location,
    ) -> Result<Permit, Ungranted> {
        if sink != Sink::Egress {
            return self.may_sink(secret, sink);
        }
        let permit = self.may_reach(secret, host, port)?;
        let decl = &self.secrets[permit.secret_index];
        let name = || decl.name.clone();
        let host = normalize_host(host).map_err(|_| Ungranted::InvalidHost {
            secret: name(),
            host: host.to_owned(),
        })?;
        if let Some((signer, _)) = decl.signs {
            let signer = &self.signers[signer];
            return Err(Ungranted::SignsOnly {
                secret: signer.name.clone(),
                kind: signer.kind.as_str(),
                host,
            });
        }
        let place = location.place();
        if !decl.locations.contains(&place) {
            return Err(Ungranted::PlaceNotGranted {
                secret: name(),
                host,
                place: place.as_str(),
            });
        }
        if let (Location::Header(header), Some(names)) = (location, &decl.header_names) {
            let header = header.to_ascii_lowercase();
            if !names.contains(&header) {
                return Err(Ungranted::HeaderNotGranted {
                    secret: name(),
                    host,
                    header,
                });
            }
        }
        Ok(permit)
    }

    /// The request half of [`Policy::may`]: whether the `allow:` rules of the secret at
    /// `secret_index` (an index in [`Policy::secrets`]) admit `request`. A secret without
    /// rules admits every request. `host` only names the host in the refusal.
    ///
    /// # Errors
    ///
    /// [`Ungranted::RequestNotAllowed`], naming the change to `allow:` that would admit it.
    ///
    /// # Panics
    ///
    /// When `secret_index` is not an index of [`Policy::secrets`].
    pub fn may_request(
        &self,
        secret_index: usize,
        host: &str,
        request: &RequestLine<'_>,
    ) -> Result<(), Ungranted> {
        let decl = &self.secrets[secret_index];
        match &decl.rules {
            Some(rules) if !rules.admits(request) => Err(Ungranted::RequestNotAllowed {
                secret: decl.name.clone(),
                host: normalize_host(host).unwrap_or_else(|_| host.to_owned()),
                method: request.method().to_owned(),
                path: request.path().to_owned(),
                fix: rules.fix(&decl.name, request),
            }),
            _ => Ok(()),
        }
    }

    /// The host half of [`Policy::may`] for [`Sink::Egress`]: may `secret`'s value go to
    /// `host:port` at all, in some location? The proxy asks this for a real value found in
    /// an outbound request: toward a host its secret grants it is left alone, anywhere else
    /// it is exfiltration and refused.
    ///
    /// # Errors
    ///
    /// The sink refusals of [`Policy::may_sink`], [`Ungranted::InvalidHost`],
    /// [`Ungranted::HostNotGranted`] or [`Ungranted::Passthrough`].
    pub fn may_reach(&self, secret: &str, host: &str, port: u16) -> Result<Permit, Ungranted> {
        let permit = self.may_sink(secret, Sink::Egress)?;
        let decl = &self.secrets[permit.secret_index];
        // A signing part's hosts are its signer's: the fix names the key that declares them.
        let name = match decl.signs {
            Some((signer, _)) => &self.signers[signer].name,
            None => &decl.name,
        };
        self.toward(&decl.hosts, name, host, port)?;
        Ok(permit)
    }

    /// The signing decision: may the signer at `signer` (an index in [`Policy::signers`])
    /// sign a request toward `host:port` whose credential scope names `service` and
    /// `region`? Its hosts must match and not be passthrough, and `services:` and
    /// `regions:`, where given, must name them.
    ///
    /// # Errors
    ///
    /// [`Ungranted::InvalidHost`], [`Ungranted::HostNotGranted`], [`Ungranted::Passthrough`],
    /// [`Ungranted::ServiceNotGranted`] or [`Ungranted::RegionNotGranted`].
    ///
    /// # Panics
    ///
    /// When `signer` is not an index of [`Policy::signers`].
    pub fn may_sign(
        &self,
        signer: usize,
        host: &str,
        port: u16,
        service: &str,
        region: &str,
    ) -> Result<(), Ungranted> {
        let decl = &self.signers[signer];
        let name = || decl.name.clone();
        self.toward(&decl.hosts, &decl.name, host, port)?;
        if decl
            .services
            .as_ref()
            .is_some_and(|services| !services.iter().any(|s| s == service))
        {
            return Err(Ungranted::ServiceNotGranted {
                secret: name(),
                service: service.to_owned(),
            });
        }
        if decl
            .regions
            .as_ref()
            .is_some_and(|regions| !regions.iter().any(|r| r == region))
        {
            return Err(Ungranted::RegionNotGranted {
                secret: name(),
                region: region.to_owned(),
            });
        }
        Ok(())
    }

    /// The host rule every egress grant shares: `host` (normalised here) and `port` among
    /// `hosts`, and not passthrough. `secret` names the key the fix points at.
    fn toward(
        &self,
        hosts: &[crate::host::HostPattern],
        secret: &str,
        host: &str,
        port: u16,
    ) -> Result<(), Ungranted> {
        let secret = || secret.to_owned();
        let Ok(host) = normalize_host(host) else {
            return Err(Ungranted::InvalidHost {
                secret: secret(),
                host: host.to_owned(),
            });
        };
        if !hosts.iter().any(|p| p.matches_normalized(&host, port)) {
            return Err(Ungranted::HostNotGranted {
                secret: secret(),
                host,
                port,
            });
        }
        if self
            .passthrough()
            .iter()
            .any(|p| p.matches_normalized(&host, port))
        {
            return Err(Ungranted::Passthrough {
                secret: secret(),
                host,
            });
        }
        Ok(())
    }

    /// The sink half of [`Policy::may`]: whether `secret` is granted `sink` at all. The
    /// launcher asks this for [`Sink::Command`] and [`Sink::File`].
    ///
    /// # Errors
    ///
    /// [`Ungranted::UnknownSecret`], [`Ungranted::RedactOnly`] or [`Ungranted::SinkNotGranted`].
    pub fn may_sink(&self, secret: &str, sink: Sink) -> Result<Permit, Ungranted> {
        let Some(secret_index) = self.secrets.iter().position(|s| s.name == secret) else {
            return Err(Ungranted::UnknownSecret {
                secret: secret.to_owned(),
            });
        };
        let decl = &self.secrets[secret_index];
        if decl.sinks.is_empty() {
            return Err(Ungranted::RedactOnly {
                secret: decl.name.clone(),
                sink,
            });
        }
        if !decl.sinks.contains(&sink) {
            return Err(Ungranted::SinkNotGranted {
                secret: decl.name.clone(),
                sink,
            });
        }
        Ok(Permit { secret_index, sink })
    }
}
