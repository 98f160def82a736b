//! The little URL handling MCP authorization needs, without a URL crate: splitting an absolute
//! `http(s)` URL, its canonical form (what a saved token is keyed by and the default RFC 8707
//! `resource`), the well-known discovery addresses, and form and query encoding.

/// An absolute `http://` or `https://` URL split into its parts (no userinfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`, lowercase.
    pub scheme: String,
    /// The host, lowercase (an IPv6 literal keeps its brackets).
    pub host: String,
    /// The port when it is not the scheme's default.
    pub port: Option<u16>,
    /// The path as written, `""` for none.
    pub path: String,
    /// The query without its `?`, if any.
    pub query: Option<String>,
}

impl Url {
    /// Parses an absolute `http(s)` URL; `None` for anything else (another scheme, userinfo,
    /// no host, a bad port, whitespace or control characters).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        if s.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return None;
        }
        let (scheme, rest) = s.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default = match scheme.as_str() {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        let rest = rest.split('#').next().unwrap_or("");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') || authority.is_empty() {
            return None;
        }
        let (host, port) = split_port(authority)?;
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q.to_owned())),
            None => (tail, None),
        };
        Some(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port: port.filter(|p| *p != default),
            path: path.to_owned(),
            query,
        })
    }

    /// `scheme://host[:port]`.
    #[must_use]
    pub fn origin(&self) -> String {
        match self.port {
            Some(p) => format!("{}://{}:{p}", self.scheme, self.host),
            None => format!("{}://{}", self.scheme, self.host),
        }
    }

    /// The canonical form (`docs/mcp.md` "Tokens"): lowercase scheme and host, no default
    /// port, no fragment, the path and query as written except that a lone `/` path is
    /// dropped, so `HTTPS://Example.com:443/` and `https://example.com` are one server.
    #[must_use]
    pub fn canonical(&self) -> String {
        let path = if self.path == "/" { "" } else { &self.path };
        match &self.query {
            Some(q) => format!("{}{path}?{q}", self.origin()),
            None => format!("{}{path}", self.origin()),
        }
    }

    /// Whether the host is a loopback address (`decisions.md` 42): `localhost`, an IPv4
    /// literal in 127.0.0.0/8, or `::1`.
    #[must_use]
    pub fn is_loopback(&self) -> bool {
        let h = self.host.trim_start_matches('[').trim_end_matches(']');
        h == "localhost"
            || h.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|a| a.is_loopback())
            || h.parse::<std::net::Ipv6Addr>()
                .is_ok_and(|a| a.is_loopback())
    }

    /// Whether a request may go here: `https`, or plain `http` only to a loopback address.
    #[must_use]
    pub fn is_allowed(&self) -> bool {
        self.scheme == "https" || self.is_loopback()
    }

    /// `origin/.well-known/<name>` followed by the path (RFC 8414 §3 / RFC 9728 §3 insertion):
    /// the path-suffixed form first when there is a path, then the root form.
    #[must_use]
    pub fn well_known(&self, name: &str) -> Vec<String> {
        let path = self.path.trim_end_matches('/');
        let root = format!("{}/.well-known/{name}", self.origin());
        if path.is_empty() {
            vec![root]
        } else {
            vec![format!("{root}{path}"), root]
        }
    }
}

/// The canonical form of `url`, `None` when it does not parse.
#[must_use]
pub fn canonical(url: &str) -> Option<String> {
    Url::parse(url).map(|u| u.canonical())
}

fn split_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let colon = if authority.starts_with('[') {
        let close = authority.find(']')?;
        match &authority[close + 1..] {
            "" => None,
            r if r.starts_with(':') => Some(close + 1),
            _ => return None,
        }
    } else {
        authority.rfind(':')
    };
    match colon {
        None => Some((authority, None)),
        Some(i) => {
            let port = &authority[i + 1..];
            if port.is_empty() {
                return Some((&authority[..i], None));
            }
            let p = port.parse::<u16>().ok()?;
            Some((&authority[..i], Some(p)))
        }
    }
}

/// `application/x-www-form-urlencoded` of `pairs` (also a URL query).
#[must_use]
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
#[must_use]
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes one form/query component (`+` is a space); `None` for a bad escape or non-UTF-8.
#[must_use]
pub fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The decoded `key=value` pairs of a query (pairs that do not decode are left out).
#[must_use]
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
}
