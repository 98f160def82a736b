//! Entry point of the `profile_front_matter` cargo-fuzz target (`fuzz/`), behind the `testing`
//! feature: the front-matter parser and both readers on any bytes, never panicking.

use super::{front_matter, profiles, skills};

/// The front-matter parser and its accessors, then the profile and skill readers, on `data`.
pub fn profile_front_matter(data: &[u8]) {
    if let Ok(doc) = front_matter::parse(data) {
        for k in doc.keys.keys() {
            let _ = doc.text(k);
            let _ = doc.list(k);
        }
    }
    let _ = profiles::parse(data);
    let _ = skills::parse("a", data);
}

#[cfg(test)]
mod tests {
    #[test]
    fn fuzz_entry_survives_odd_inputs() {
        for b in [
            &b"---"[..],
            b"---\n---",
            b"---\na: '",
            b"---\na: \"\\",
            b"---\n\xFF",
            b"---\r",
        ] {
            super::profile_front_matter(b);
        }
    }
}
