//! Tool input schemas, compiled once and checked before a call's policy and approval
//! (`runner.md` §2). The validator is `boon` (JSON Schema 2020-12 and older drafts, no
//! network or file access here: every `$ref` outside the schema itself is refused at compile
//! time). Its reasons name only what the schema says (property names, bounds, types), never a
//! value of the input, so a refusal cannot echo a secret the model put there.

use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// Largest schema compiled, serialized: 64 KiB (a client tool's is at most 16 KiB, an MCP
/// message at most 1 MiB). A bigger one is refused rather than compiled.
pub const SCHEMA_BYTES: usize = 64 << 10;

/// Longest reason [`Validator::check`] gives, in bytes.
pub const REASON_BYTES: usize = 256;

/// Where the compiled schema lives in boon's store: an in-memory URL, never fetched.
const URL: &str = "urn:magi-code:tool-input";

/// Why a schema was not compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaError {
    /// Over [`SCHEMA_BYTES`] serialized.
    TooLarge,
    /// Not a valid schema (an unknown type, a bad regex, a `$ref` that does not resolve
    /// inside it, ...).
    Invalid,
}

impl SchemaError {
    /// A fixed phrase for the error, for results and diagnostics.
    #[must_use]
    pub const fn phrase(self) -> &'static str {
        match self {
            Self::TooLarge => "its input schema is over 64 KiB",
            Self::Invalid => "its input schema is not a valid JSON Schema",
        }
    }
}

/// A compiled input schema, cheap to clone and share between threads.
#[derive(Clone)]
pub struct Validator(Arc<(boon::Schemas, boon::SchemaIndex)>);

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Validator")
    }
}

impl PartialEq for Validator {
    /// Two validators are equal when they are the same compilation.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Refuses every URL: a schema is compiled from its own text only (boon's default loader
/// would read `file://` URLs).
struct NoLoader;

impl boon::UrlLoader for NoLoader {
    fn load(&self, _url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err("external schema references are not loaded".into())
    }
}

/// Compiles `schema`, bounded by [`SCHEMA_BYTES`]. Never panics (a panic inside the compiler
/// is an [`SchemaError::Invalid`]).
pub fn compile(schema: &Value) -> Result<Validator, SchemaError> {
    let size = serde_json::to_vec(schema).map_or(usize::MAX, |b| b.len());
    if size > SCHEMA_BYTES {
        return Err(SchemaError::TooLarge);
    }
    std::panic::catch_unwind(|| {
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        c.use_loader(Box::new(NoLoader));
        c.add_resource(URL, schema.clone())
            .map_err(|_| SchemaError::Invalid)?;
        let index = c
            .compile(URL, &mut schemas)
            .map_err(|_| SchemaError::Invalid)?;
        Ok(Validator(Arc::new((schemas, index))))
    })
    .unwrap_or(Err(SchemaError::Invalid))
}

impl Validator {
    /// Checks `input`; Err is a one-line reason naming where the input breaks the schema
    /// and how, at most [`REASON_BYTES`], built from the schema only.
    pub fn check(&self, input: &Value) -> Result<(), String> {
        let (schemas, index) = &*self.0;
        match schemas.validate(input, *index) {
            Ok(()) => Ok(()),
            Err(e) => Err(cut(&reason(&e), REASON_BYTES)),
        }
    }
}

/// The first error that says something itself (groups and references are descended into),
/// and the fields of its place: each `$ref` passed restarts the schema location at its target.
fn leaf<'a, 's, 'v>(
    e: &'a boon::ValidationError<'s, 'v>,
    fields: &mut Vec<String>,
) -> &'a boon::ValidationError<'s, 'v> {
    use boon::ErrorKind as K;
    match (&e.kind, e.causes.first()) {
        (K::Reference { .. }, Some(c)) => {
            fields.extend(place(e.schema_url));
            leaf(c, fields)
        }
        (K::Group | K::Schema { .. }, Some(c)) => leaf(c, fields),
        _ => {
            fields.extend(place(e.schema_url));
            e
        }
    }
}

/// `<where>: <what>`, both from the schema.
fn reason(e: &boon::ValidationError<'_, '_>) -> String {
    let mut fields = Vec::new();
    let e = leaf(e, &mut fields);
    let place = if fields.is_empty() {
        "the input".to_owned()
    } else {
        fields.join(".").replace(".[", "[")
    };
    format!("{place}: {}", what(&e.kind))
}

/// The field a schema location is about, from the property names the schema itself spells
/// (`/properties/env/additionalProperties` → `env`, `*`).
fn place(schema_url: &str) -> Vec<String> {
    let pointer = schema_url.split_once('#').map_or("", |(_, p)| p);
    let segs: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        match segs[i].as_str() {
            "properties" if i + 1 < segs.len() => {
                parts.push(segs[i + 1].clone());
                i += 1;
            }
            "patternProperties" if i + 1 < segs.len() => {
                parts.push("*".into());
                i += 1;
            }
            "additionalProperties" => parts.push("*".into()),
            "items" | "additionalItems" => parts.push("[]".into()),
            "prefixItems" if i + 1 < segs.len() => {
                parts.push(format!("[{}]", segs[i + 1]));
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts
}

fn unescape(seg: &str) -> String {
    let seg = seg.replace("~1", "/").replace("~0", "~");
    // Percent-escapes of the URL fragment (boon writes the pointer as a URL fragment).
    let mut out = Vec::with_capacity(seg.len());
    let b = seg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What is wrong, without any value of the input.
fn what(kind: &boon::ErrorKind<'_, '_>) -> String {
    use boon::ErrorKind as K;
    let list = |v: &[&str]| {
        v.iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match kind {
        K::Type { got, want } => {
            let want: Vec<String> = want.iter().map(|t| t.to_string()).collect();
            format!("expected {}, got {got}", want.join(" or "))
        }
        K::Required { want } => format!("missing required property {}", list(want)),
        K::DependentRequired { prop, missing } | K::Dependency { prop, missing } => {
            format!("`{prop}` needs {}", list(missing))
        }
        K::AdditionalProperties { got } => {
            let n = got.len();
            format!(
                "{n} propert{} the schema does not allow",
                if n == 1 { "y" } else { "ies" }
            )
        }
        K::PropertyName { .. } => "a property name the schema does not allow".into(),
        K::Enum { .. } => "not one of the allowed values".into(),
        K::Const { .. } => "not the required value".into(),
        K::Format { want, .. } => format!("not a valid {want}"),
        K::MinProperties { want, .. } => format!("fewer than {want} properties"),
        K::MaxProperties { want, .. } => format!("more than {want} properties"),
        K::MinItems { want, .. } => format!("fewer than {want} items"),
        K::MaxItems { want, .. } => format!("more than {want} items"),
        K::MinLength { want, .. } => format!("shorter than {want} characters"),
        K::MaxLength { want, .. } => format!("longer than {want} characters"),
        K::Pattern { .. } => "does not match the schema's pattern".into(),
        K::Minimum { want, .. } => format!("less than the minimum {want}"),
        K::Maximum { want, .. } => format!("more than the maximum {want}"),
        K::ExclusiveMinimum { want, .. } => format!("not more than {want}"),
        K::ExclusiveMaximum { want, .. } => format!("not less than {want}"),
        K::MultipleOf { want, .. } => format!("not a multiple of {want}"),
        K::UniqueItems { .. } => "items are not unique".into(),
        K::Contains | K::MinContains { .. } | K::MaxContains { .. } => {
            "does not contain the items the schema asks for".into()
        }
        K::AdditionalItems { .. } => "more items than the schema allows".into(),
        K::FalseSchema => "not allowed".into(),
        K::Not => "matches a schema it must not match".into(),
        K::AnyOf | K::AllOf | K::OneOf(None) => "matches none of the allowed forms".into(),
        K::OneOf(Some(_)) => "matches more than one of the allowed forms".into(),
        _ => "breaks the schema".into(),
    }
}

/// `s` cut to at most `max` bytes on a character boundary, one line.
fn cut(s: &str, max: usize) -> String {
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests;
