//! Strict JSON: a string-aware depth pre-scan and a serde seed that builds a value while
//! recording duplicate keys (after unescaping, so `{"a":1,"\u0061":2}` is caught).

use crate::limits::JSON_DEPTH;
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;

/// Whether any path in `bytes` nests more than `max` containers, strings skipped.
///
/// Runs before the parser so that depth wins over syntax, as `decisions.md` 5 orders them.
#[must_use]
pub fn depth_exceeds(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Duplicate keys seen while parsing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Duplicates {
    /// Keys that appear more than once in the top-level object.
    pub top: Vec<String>,
    /// Whether any nested object holds a duplicate key.
    pub nested: bool,
}

/// Why a strict parse failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictError {
    /// Nesting over the bound (the pre-scan normally reports it first).
    Depth,
    /// Not one JSON value: syntax, bad escape, trailing bytes.
    Syntax,
}

/// Parses one JSON value strictly: depth bounded, trailing bytes rejected, duplicates recorded.
pub fn parse_strict(bytes: &[u8]) -> Result<(Value, Duplicates), StrictError> {
    let dups = RefCell::new(Duplicates::default());
    let depth_hit = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Strict {
        depth: 0,
        dups: &dups,
        depth_hit: &depth_hit,
    };
    let value = match seed.deserialize(&mut de) {
        Ok(v) => v,
        Err(_) if depth_hit.get() => return Err(StrictError::Depth),
        Err(_) => return Err(StrictError::Syntax),
    };
    de.end().map_err(|_| StrictError::Syntax)?;
    Ok((value, dups.into_inner()))
}

#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    dups: &'a RefCell<Duplicates>,
    depth_hit: &'a std::cell::Cell<bool>,
}

impl Strict<'_> {
    fn deeper(&self) -> Option<Self> {
        (self.depth < JSON_DEPTH).then_some(Strict {
            depth: self.depth + 1,
            dups: self.dups,
            depth_hit: self.depth_hit,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let Some(inner) = self.deeper() else {
            self.depth_hit.set(true);
            return Err(A::Error::custom("depth"));
        };
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict { ..inner })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let Some(inner) = self.deeper() else {
            self.depth_hit.set(true);
            return Err(A::Error::custom("depth"));
        };
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict { ..inner })?;
            if out.contains_key(&key) {
                let mut d = self.dups.borrow_mut();
                if inner.depth == 1 {
                    d.top.push(key.clone());
                } else {
                    d.nested = true;
                }
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(n: usize) -> String {
        let mut s = String::from("{\"a\":");
        for _ in 1..n {
            s.push('[');
        }
        s.push('1');
        for _ in 1..n {
            s.push(']');
        }
        s.push('}');
        s
    }

    #[test]
    fn depth_32_passes_33_fails() {
        assert!(!depth_exceeds(nested(32).as_bytes(), 32));
        assert!(parse_strict(nested(32).as_bytes()).is_ok());
        assert!(depth_exceeds(nested(33).as_bytes(), 32));
        assert_eq!(
            parse_strict(nested(33).as_bytes()).unwrap_err(),
            StrictError::Depth
        );
        assert!(!depth_exceeds(
            br#"{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"["}"#,
            2
        ));
    }

    #[test]
    fn escaped_duplicate_keys_are_found() {
        let (_, d) = parse_strict(br#"{"a":1,"\u0061":2}"#).unwrap();
        assert_eq!(d.top, vec!["a".to_string()]);
        let (_, d) = parse_strict(br#"{"p":{"x":[{"k":1,"k":1}]}}"#).unwrap();
        assert!(d.nested && d.top.is_empty());
        let (_, d) = parse_strict(br#"[{"a":1},{"a":2}]"#).unwrap();
        assert_eq!(d, Duplicates::default());
    }

    #[test]
    fn syntax_faults() {
        assert_eq!(
            parse_strict(b"{\"a\":1} x").unwrap_err(),
            StrictError::Syntax
        );
        assert_eq!(
            parse_strict(br#"{"a":"\ud800"}"#).unwrap_err(),
            StrictError::Syntax
        );
        assert!(parse_strict(b"{\"a\":1}\r").is_ok());
    }
}

/// The five envelope members, in the order `TopLevel::Object` stores them.
pub const ENVELOPE_KEYS: [&str; 5] = ["protocol", "version", "id", "method", "params"];

/// A strict parse of a whole frame that keeps only the envelope members.
#[derive(Debug, Clone, PartialEq)]
pub enum TopLevel {
    /// Valid JSON that is not an object.
    NotObject,
    /// An object.
    Object {
        /// Values of [`ENVELOPE_KEYS`] (the last one when duplicated).
        fields: [Option<Value>; 5],
        /// Which envelope members appeared more than once (bit per [`ENVELOPE_KEYS`] index).
        duplicated: u8,
        /// Whether a member outside the envelope appeared.
        unknown: bool,
        /// Whether a nested object holds a duplicate key.
        nested_duplicates: bool,
    },
}

/// Parses a frame as strictly as [`parse_strict`] but without building the top-level map:
/// the request path is hot for polling clients.
pub fn parse_top_level(bytes: &[u8]) -> Result<TopLevel, StrictError> {
    let dups = RefCell::new(Duplicates::default());
    let depth_hit = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Top {
        inner: Strict {
            depth: 1,
            dups: &dups,
            depth_hit: &depth_hit,
        },
    };
    let top = match Deserializer::deserialize_any(&mut de, seed) {
        Ok(v) => v,
        Err(_) if depth_hit.get() => return Err(StrictError::Depth),
        Err(_) => return Err(StrictError::Syntax),
    };
    de.end().map_err(|_| StrictError::Syntax)?;
    Ok(match top {
        TopLevel::Object {
            fields,
            duplicated,
            unknown,
            ..
        } => TopLevel::Object {
            fields,
            duplicated,
            unknown,
            nested_duplicates: dups.borrow().nested,
        },
        other => other,
    })
}

struct Top<'a> {
    inner: Strict<'a>,
}

struct KeyIndex;

impl<'de> DeserializeSeed<'de> for KeyIndex {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIndex {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(ENVELOPE_KEYS.iter().position(|k| *k == v))
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = TopLevel;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_unit<E>(self) -> Result<TopLevel, E> {
        Ok(TopLevel::NotObject)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TopLevel, A::Error> {
        while seq.next_element_seed(Strict { ..self.inner })?.is_some() {}
        Ok(TopLevel::NotObject)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut fields: [Option<Value>; 5] = Default::default();
        let mut duplicated = 0u8;
        let mut unknown = false;
        while let Some(key) = map.next_key_seed(KeyIndex)? {
            let value = map.next_value_seed(Strict { ..self.inner })?;
            match key {
                Some(i) => {
                    if fields[i].is_some() {
                        duplicated |= 1 << i;
                    }
                    fields[i] = Some(value);
                }
                None => unknown = true,
            }
        }
        Ok(TopLevel::Object {
            fields,
            duplicated,
            unknown,
            nested_duplicates: false,
        })
    }
}
