//! base64url (RFC 4648 section 5) as OAuth and JWTs use it: encoded without padding, decoded
//! with or without it.

use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

const URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// `data` in base64url, unpadded.
#[must_use]
pub fn encode(data: &[u8]) -> String {
    URL.encode(data)
}

/// The bytes of base64url `text`, padded or not; `None` on any other byte or a bad length.
#[must_use]
pub fn decode(text: &str) -> Option<Vec<u8>> {
    URL.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_length_padded_or_not_and_refuses_other_alphabets() {
        for text in ["", "a", "ab", "abc", "abcd", "\u{ff}\u{fe}?>"] {
            assert_eq!(decode(&encode(text.as_bytes())).unwrap(), text.as_bytes());
        }
        assert_eq!(encode(b"f"), "Zg");
        assert_eq!(encode(&[0xfb, 0xff]), "-_8", "the URL alphabet, unpadded");
        assert_eq!(decode("YWJj").unwrap(), b"abc");
        assert_eq!(decode("YQ==").unwrap(), b"a", "padding is accepted");
        assert_eq!(decode("YQ").unwrap(), b"a", "and not needed");
        assert_eq!(
            decode("a+b/"),
            None,
            "the standard alphabet is not base64url"
        );
        assert_eq!(decode("a"), None, "no length leaves one character over");
    }
}
