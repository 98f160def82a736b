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
