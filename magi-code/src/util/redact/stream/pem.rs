//! Stage 1 of the [`super::Redactor`]: control characters dropped, private-key PEM blocks (e)
//! replaced.

use crate::util::redact::secrets::REDACTED;

/// Longest PEM label (`RSA PRIVATE KEY`, `OPENSSH PRIVATE KEY`, ...).
const LABEL_BYTES: usize = 64;
/// Longest PEM header line: `-----BEGIN `, the label, `-----`.
pub(super) const HEADER_BYTES: usize = 11 + LABEL_BYTES + 5;

/// Whether stage 1 drops `c`: control characters other than LF and TAB never reach a
/// frontend.
pub(in crate::util::redact) fn dropped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// How far a held tail is into a PEM header.
enum Header {
    /// Still a prefix of a header.
    Prefix,
    /// A whole header of a private key with this label.
    Complete(String),
    /// Not a header.
    No,
}

/// A label character: printable ASCII other than `-` (RFC 7468, single hyphens aside) and
/// the brackets of a marker, so a label never holds one and redaction stays idempotent.
fn label_char(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && !matches!(c, '-' | '[' | ']')
}

/// Where `h` (which starts with `-`) stands against `-----BEGIN <label>PRIVATE KEY-----`.
fn header(h: &str) -> Header {
    const HEAD: &str = "-----BEGIN ";
    if h.len() <= HEAD.len() {
        return if HEAD.starts_with(h) {
            Header::Prefix
        } else {
            Header::No
        };
    }
    if !h.starts_with(HEAD) {
        return Header::No;
    }
    let rest = &h[HEAD.len()..];
    let label_len = rest.find(|c: char| !label_char(c)).unwrap_or(rest.len());
    let label = &rest[..label_len];
    if label_len > LABEL_BYTES {
        return Header::No;
    }
    let tail = &rest[label_len..];
    if tail.is_empty() {
        return Header::Prefix;
    }
    if label.is_empty() || !label.ends_with("PRIVATE KEY") || !"-----".starts_with(tail) {
        return Header::No;
    }
    if tail.len() == 5 {
        Header::Complete(label.to_owned())
    } else {
        Header::Prefix
    }
}

#[derive(Debug, Default)]
pub(super) struct Pem {
    /// A tail that may be the start of a header (it starts with `-`).
    hold: String,
    /// Inside a block: its end line and the last characters seen (to find it).
    block: Option<(String, String)>,
}

impl Pem {
    pub(super) fn held(&self) -> usize {
        self.hold.len() + self.block.as_ref().map_or(0, |(_, t)| t.len())
    }

    pub(super) fn feed(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars().filter(|c| !dropped(*c)) {
            if let Some((end, tail)) = &mut self.block {
                tail.push(c);
                if tail.ends_with(end.as_str()) {
                    self.block = None;
                } else if tail.len() > end.len() {
                    let cut = tail.len() - end.len();
                    let cut = (cut..=tail.len())
                        .find(|i| tail.is_char_boundary(*i))
                        .unwrap_or(tail.len());
                    tail.drain(..cut);
                }
                continue;
            }
            if self.hold.is_empty() && c != '-' {
                out.push(c);
                continue;
            }
            self.hold.push(c);
            self.settle(&mut out);
        }
        out
    }

    /// Judges the held tail: emits what can no longer start a header, opens a block on a
    /// whole header.
    fn settle(&mut self, out: &mut String) {
        loop {
            match header(&self.hold) {
                Header::Prefix => return,
                Header::Complete(label) => {
                    out.push_str(REDACTED);
                    self.hold.clear();
                    self.block = Some((format!("-----END {label}-----"), String::new()));
                    return;
                }
                Header::No => {
                    // The first character starts no header; a later `-` may.
                    let next = self.hold[1..].find('-').map_or(self.hold.len(), |i| i + 1);
                    out.push_str(&self.hold[..next]);
                    self.hold.drain(..next);
                    if self.hold.is_empty() {
                        return;
                    }
                }
            }
        }
    }

    /// The end of the text: a held header start is text; an open block stays redacted to
    /// the end.
    pub(super) fn finish(&mut self) -> String {
        self.block = None;
        std::mem::take(&mut self.hold)
    }
}
