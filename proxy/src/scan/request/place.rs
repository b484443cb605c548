//! Where in a request a match was found, and what the scan did there: the names the audit
//! log and every refusal use.

use http::header::HeaderName;
use sluice_guard::Tally;
use sluice_policies::Location;

/// Where in a request a match was found, as the audit log names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Place {
    /// The method.
    Method,
    /// The path (before `?`).
    Path,
    /// The query string.
    Query,
    /// A header's name.
    HeaderName,
    /// A header's value: `header:<name>`.
    Header(HeaderName),
    /// The body.
    Body,
    /// The trailers: never a grantable place (a declaration grants header, query or body),
    /// so placeholders there are refused (kept on a verbatim host), as in the path.
    Trailers,
    /// A WebSocket control frame's payload (ping, pong, a close reason): never grantable.
    WebSocketControl,
}

impl Place {
    /// The grantable location this place is, if any: method, path and header names are
    /// never swapped.
    pub(super) fn location(&self) -> Option<Location> {
        match self {
            Self::Query => Some(Location::Query),
            Self::Body => Some(Location::Body),
            Self::Header(name) => Some(Location::Header(name.to_string())),
            Self::Method
            | Self::Path
            | Self::HeaderName
            | Self::Trailers
            | Self::WebSocketControl => None,
        }
    }

    /// The `location` field of the audit log.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Method => "method".into(),
            Self::Path => "path".into(),
            Self::Query => "query".into(),
            Self::HeaderName => "header-name".into(),
            Self::Header(name) => format!("header:{name}"),
            Self::Body => "body".into(),
            Self::Trailers => "trailers".into(),
            Self::WebSocketControl => "websocket-control".into(),
        }
    }
}

/// What the outbound scan did in one place: the audit log's `swap` and `verbatim` events.
#[derive(Debug)]
pub(crate) struct Swapped {
    /// Where.
    pub place: Place,
    /// Per secret: swapped placeholders, kept placeholders (verbatim), kept values.
    pub tally: Tally,
}
