//! The kinds of value mcpvisor's TOML holds, each read by serde with the
//! words an error needs ("a number of seconds greater than zero, like 60
//! or 2.5") and described in the JSON Schema the same way.

use std::any::TypeId;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use super::duration::parse_duration;
use super::{Keyword, Transport};

/// What a table read as each struct looks like, for "must be a table, like ...".
pub(crate) const TABLE_EXAMPLES: &[(&str, &str)] = &[
    ("AuthFile", "{ type = \"bearer\", token = \"${TOKEN}\" }"),
    ("BackoffFile", "{ initial = \"100ms\", max = \"30s\" }"),
    ("LimitsFile", "{ rate = 10, burst = 20, concurrent = 4 }"),
    ("RateLimitFile", "{ rate = 10, burst = 20, concurrent = 4 }"),
    ("ToolsFile", "{ allow = [\"read_*\"], deny = [\"*delete*\"] }"),
    ("IdentityProviderFile", "{ token_endpoint = \"https://idp.example.com/token\", client_id = \"...\", id_token_file = \"...\" }"),
    ("SandboxFile", "{ network = \"none\", memory = \"512MiB\" }"),
    ("KeyFile", "{ token = \"${VAR}\" }"),
    ("PerCallerTable", "{ max_callers = 16, caller_idle = \"5m\", secrets = \"/etc/mcpvisor/caller-secrets.toml\" }"),
];

/// `true`, `false`, or a table read as `T` (a setting that can be turned
/// on with its defaults, off, or tuned); errors show `T`'s example of
/// [`TABLE_EXAMPLES`]. Described inline in the JSON Schema.
pub(crate) enum OnOrTable<T> {
    On(bool),
    Table(T),
}

impl<T: JsonSchema> JsonSchema for OnOrTable<T> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("OnOrTable_{}", T::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({ "anyOf": [{ "type": "boolean" }, generator.subschema_for::<T>()] })
    }
}

impl<'de, T: Deserialize<'de> + JsonSchema> Deserialize<'de> for OnOrTable<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + JsonSchema> Visitor<'de> for Either<T> {
            type Value = OnOrTable<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let name = T::schema_name();
                let example = TABLE_EXAMPLES.iter().find(|(kind, _)| *kind == name).map_or("{ ... }", |(_, example)| example);
                write!(f, "true, false or a table like {example}, not {{found}}")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<OnOrTable<T>, E> {
                Ok(OnOrTable::On(on))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OnOrTable<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(OnOrTable::Table)
            }
        }
        deserializer.deserialize_any(Either(PhantomData))
    }
}

/// A newtype read from one TOML scalar: `accept` takes it or refuses it
/// (`must be {expecting}`); the JSON Schema describes it as `schema`.
macro_rules! scalar_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $expecting:expr, $schema:tt, $accept:expr) => {
        $(#[$doc])*
        pub(crate) struct $name(pub $inner);

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::config::values::scalar(deserializer, $expecting, $accept).map($name)
            }
        }

        $crate::config::values::schema_as!($name, $schema);
    };
}
pub(crate) use scalar_type;

/// Describes `$name` in the JSON Schema as `schema`, inline.
macro_rules! schema_as {
    ($name:ident, $schema:tt) => {
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!($schema)
            }
        }
    };
}
pub(crate) use schema_as;

/// A visitor that says `expecting` and takes what `accept` takes.
macro_rules! expecting {
    ($f:ident, $text:expr) => {
        fn expecting(&self, $f: &mut fmt::Formatter<'_>) -> fmt::Result {
            $f.write_str($text)
        }
    };
}

/// One TOML scalar, for the kinds of value that take more than one type.
pub(crate) enum Scalar {
    Int(i64),
    Float(f64),
    Str(String),
    Bool,
}

impl Scalar {
    fn number(&self) -> Option<f64> {
        match self {
            Scalar::Int(n) => Some(*n as f64),
            Scalar::Float(x) => Some(*x),
            _ => None,
        }
    }
}

/// Reads a scalar and gives it to `accept`; anything it refuses, and any
/// table or array, is an error saying `must be {expecting}`.
pub(crate) fn scalar<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    expecting: &'static str,
    accept: impl FnOnce(Scalar) -> Option<T>,
) -> Result<T, D::Error> {
    struct Any(&'static str);
    impl Visitor<'_> for Any {
        type Value = Scalar;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Scalar, E> {
            Ok(Scalar::Int(n))
        }
        fn visit_f64<E: de::Error>(self, x: f64) -> Result<Scalar, E> {
            Ok(Scalar::Float(x))
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Scalar, E> {
            Ok(Scalar::Str(text.into()))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Scalar, E> {
            Ok(Scalar::Bool)
        }
    }
    let value = deserializer.deserialize_any(Any(expecting))?;
    accept(value).ok_or_else(|| de::Error::custom(format!("must be {expecting}")))
}

/// [`scalar`], where `accept` says itself why it refuses a value (`Err`
/// is the whole message: "must be one reference such as ...").
pub(crate) fn scalar_or<'de, D: Deserializer<'de>, T>(
    deserializer: D,
    expecting: &'static str,
    accept: impl FnOnce(Scalar) -> Result<T, String>,
) -> Result<T, D::Error> {
    let mut why = None;
    let value = scalar(deserializer, expecting, |value| accept(value).map_err(|message| why = Some(message)).ok());
    value.map_err(|error| why.map_or(error, de::Error::custom))
}

/// Any value: its text when it is a string (a list's element that is not
/// one is reported on the list: "must hold strings only").
pub(crate) struct MaybeText(pub Option<String>);

impl<'de> Deserialize<'de> for MaybeText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(MaybeText(
            scalar(deserializer, "", |value| match value {
                Scalar::Str(text) => Some(text),
                _ => None,
            })
            .ok(),
        ))
    }
}

/// A list of strings, refused as a whole: `must be {expecting}`, or `not_text`
/// when an element is not a string.
pub(crate) fn string_list<'de, D: Deserializer<'de>>(
    deserializer: D,
    expecting: &'static str,
    not_text: &'static str,
) -> Result<Vec<String>, D::Error> {
    struct Texts(&'static str, &'static str);
    impl<'de> Visitor<'de> for Texts {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut list = Vec::new();
            while let Some(MaybeText(text)) = seq.next_element::<MaybeText>()? {
                list.push(text.ok_or_else(|| de::Error::custom(self.1))?);
            }
            Ok(list)
        }
    }
    deserializer.deserialize_seq(Texts(expecting, not_text))
}

/// A list of strings as `[serve]` and `[agent]` write them.
#[derive(Debug, Clone, Default, PartialEq, JsonSchema)]
#[schemars(transparent)]
pub(crate) struct Strings(pub Vec<String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        string_list(deserializer, "a list of strings", "must hold strings only").map(Strings)
    }
}

/// `["a", "b"]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TextList(pub Vec<String>);

/// Reads an array of strings, saying `expecting` when it is something else.
pub(crate) fn strings<'de, D: Deserializer<'de>>(deserializer: D, expecting: &'static str) -> Result<Vec<String>, D::Error> {
    struct Strings(&'static str);
    impl<'de> Visitor<'de> for Strings {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut list = Vec::new();
            while let Some(text) = seq.next_element::<String>()? {
                list.push(text);
            }
            Ok(list)
        }
    }
    deserializer.deserialize_seq(Strings(expecting))
}

impl<'de> Deserialize<'de> for TextList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        strings(deserializer, "an array of strings, like [\"a\", \"b\"]").map(TextList)
    }
}

impl JsonSchema for TextList {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "TextList".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "array", "items": { "type": "string" } })
    }
}

/// `{ NAME = "value" }`, in key order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TextMap(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for TextMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Texts;
        impl<'de> Visitor<'de> for Texts {
            type Value = BTreeMap<String, String>;
            expecting!(f, "a table, like { NAME = \"value\" }");
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut texts = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, String>()? {
                    texts.insert(key, value);
                }
                Ok(texts)
            }
        }
        deserializer.deserialize_map(Texts).map(TextMap)
    }
}

impl JsonSchema for TextMap {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "TextMap".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "object", "additionalProperties": { "type": "string" } })
    }
}

/// A table whose keys are names (servers, tools, patterns), in file order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ordered<V>(pub Vec<(String, V)>);

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = Vec<(String, V)>;
            expecting!(f, "a table");
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, V>()? {
                    entries.push(entry);
                }
                Ok(entries)
            }
        }
        deserializer.deserialize_map(Entries(PhantomData)).map(Ordered)
    }
}

impl<V: JsonSchema> JsonSchema for Ordered<V> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Ordered_{}", V::schema_name()).into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let values = generator.subschema_for::<V>();
        json_schema!({ "type": "object", "additionalProperties": values })
    }
}

/// One of a [`Keyword`]'s spellings: `"on-failure"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Word<K>(pub K);

/// What a file that names the transport only code can make is told.
const IN_PROCESS: &str = "is \"in-process\": such a server is registered in code by the program that embeds mcpvisor, never read from a file; write \"stdio\", \"http\" or \"sse\"";

impl<'de, K: Keyword> Deserialize<'de> for Word<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let word = String::deserialize(deserializer)?;
        if TypeId::of::<K>() == TypeId::of::<Transport>() && word == Transport::InProcess.as_str() {
            return Err(de::Error::custom(IN_PROCESS));
        }
        K::parse(&word).map(Word).ok_or_else(|| de::Error::custom(format!("is {word:?}; write one of {}", K::choices())))
    }
}

impl<K: Keyword> JsonSchema for Word<K> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "Word".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = K::CHOICES.iter().map(|(name, _)| *name).collect();
        json_schema!({ "type": "string", "enum": names })
    }
}

/// What [`parse_duration`] reads, for the JSON Schema.
pub(crate) const DURATION_PATTERN: &str = r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h)\s*$";
const SECONDS: &str = "a number of seconds greater than zero, like 60 or 2.5";
const SPAN: &str = "a span of time greater than zero, like \"100ms\", \"60s\", \"10m\" or a number of seconds";

fn seconds(value: f64) -> Option<Duration> {
    Some(value).filter(|s| *s > 0.0).and_then(|s| Duration::try_from_secs_f64(s).ok())
}

scalar_type!(
    /// A time-out: a number of seconds above zero (`60`, `2.5`).
    #[derive(Debug, Clone, Copy, PartialEq)]
    Seconds(Duration),
    SECONDS,
    { "type": "number", "exclusiveMinimum": 0, "description": SECONDS },
    |value: Scalar| value.number().and_then(seconds)
);

scalar_type!(
    /// A span of time: `"250ms"`, `"60s"`, `"10m"`, `"1h"`, or a number of seconds; above zero.
    #[derive(Debug, Clone, Copy, PartialEq)]
    Span(Duration),
    SPAN,
    {
        "description": SPAN,
        "anyOf": [
            { "type": "string", "pattern": DURATION_PATTERN },
            { "type": "number", "exclusiveMinimum": 0 }
        ]
    },
    |value: Scalar| match value {
        Scalar::Str(text) => parse_duration(&text).filter(|d| !d.is_zero()),
        number => number.number().and_then(seconds),
    }
);

/// A whole number of at least `MIN`, that fits `T`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Count<T, const MIN: i64>(pub T);

impl<'de, T: TryFrom<i64>, const MIN: i64> Deserialize<'de> for Count<T, MIN> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Whole<T, const MIN: i64>(PhantomData<T>);
        impl<T: TryFrom<i64>, const MIN: i64> Visitor<'_> for Whole<T, MIN> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a whole number of at least {MIN}")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
                Some(n)
                    .filter(|n| *n >= MIN)
                    .and_then(|n| T::try_from(n).ok())
                    .ok_or_else(|| E::custom(format!("must be a whole number of at least {MIN}")))
            }
        }
        deserializer.deserialize_any(Whole::<T, MIN>(PhantomData)).map(Count)
    }
}

impl<T, const MIN: i64> JsonSchema for Count<T, MIN> {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        format!("Count{MIN}").into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "integer", "minimum": MIN })
    }
}

const RATE: &str = "a number of calls per second greater than zero, like 10 or 0.5";

scalar_type!(
    /// Calls per second, above zero (`10`, `0.5`).
    #[derive(Debug, Clone, Copy, PartialEq)]
    Rate(f64),
    RATE,
    { "type": "number", "exclusiveMinimum": 0, "description": RATE },
    |value: Scalar| value.number().filter(|r| r.is_finite() && *r > 0.0)
);

/// One set of rate limits: a tool's own, or each caller's of `[serve]`.
#[derive(serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateLimitFile {
    pub rate: Option<Rate>,
    pub burst: Option<Count<u32, 1>>,
    pub concurrent: Option<Count<usize, 1>>,
}

impl RateLimitFile {
    pub(crate) fn limit(&self) -> crate::rate_limit::RateLimit {
        crate::rate_limit::RateLimit {
            rate: self.rate.map(|r| r.0),
            burst: self.burst.map(|c| c.0),
            concurrent: self.concurrent.map(|c| c.0),
        }
    }
}
