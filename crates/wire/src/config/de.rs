//! serde's side of mcpvisor's TOML: a `Deserializer` over the `toml_edit`
//! document (the one parse that `add`/`remove` also edit), so the file
//! types below derive `Deserialize` while every error still names the key
//! the way the hand-written readers did.
//!
//! What it adds to a plain TOML deserializer:
//! - the path of the value in every error (`args[1]`, `auth.token`), and
//!   the type TOML calls it (`inline table`, `array of tables`);
//! - strict tables: a key that is not a field of the struct read is an
//!   error listing the struct's fields in their declared order (the
//!   `serde_ignored` of this crate: nothing is ever ignored silently);
//! - a table read as an enum is tagged by its `type` key
//!   (`auth = { type = "bearer", token = "..." }`); its other keys are the
//!   variant's fields;
//! - `must be {expected}, not {found}` for a value of the wrong type, where
//!   `expected` is the visitor's own words (so a newtype says what to write)
//!   and `{found}` may be placed inside them.

use std::fmt::{self, Display};

use serde::de::{self, DeserializeSeed, Error as _, Visitor};
use toml_edit::{Item, Table, Value};

use crate::error::ConfigError;

/// One value of the document, wherever `toml_edit` keeps it.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub enum Node<'a> {
    Item(&'a Item),
    Value(&'a Value),
    Table(&'a Table),
}

enum View<'a> {
    Str(&'a str),
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
    Array(Vec<Node<'a>>),
    Table(Vec<(&'a str, Node<'a>)>),
    Nothing,
}

impl<'a> Node<'a> {
    fn type_name(self) -> &'static str {
        match self {
            Node::Item(item) => item.type_name(),
            Node::Value(value) => value.type_name(),
            Node::Table(_) => "table",
        }
    }

    fn value(value: &'a Value) -> View<'a> {
        match value {
            Value::String(s) => View::Str(s.value()),
            Value::Integer(i) => View::Int(*i.value()),
            Value::Float(f) => View::Float(*f.value()),
            Value::Boolean(b) => View::Bool(*b.value()),
            Value::Datetime(d) => View::Text(d.value().to_string()),
            Value::Array(array) => View::Array(array.iter().map(Node::Value).collect()),
            Value::InlineTable(table) => View::Table(table.iter().map(|(key, value)| (key, Node::Value(value))).collect()),
        }
    }

    fn view(self) -> View<'a> {
        match self {
            Node::Value(value) | Node::Item(Item::Value(value)) => Node::value(value),
            Node::Table(table) | Node::Item(Item::Table(table)) => {
                View::Table(table.iter().map(|(key, item)| (key, Node::Item(item))).collect())
            }
            Node::Item(Item::ArrayOfTables(tables)) => View::Array(tables.iter().map(Node::Table).collect()),
            Node::Item(Item::None) => View::Nothing,
        }
    }
}

/// What went wrong, before the path is known.
#[derive(Debug, Clone, PartialEq)]
#[doc(hidden)]
pub enum Kind {
    /// `{field}` + this text: "must be a string, not integer".
    Invalid(String),
    /// A value of the wrong type: the words of what was expected.
    WrongType(String),
    /// A key the table does not have, and the ones it has.
    Unknown { key: String, known: Vec<&'static str> },
}

/// An error of the file's values, with the path of the value it is about.
#[derive(Debug, Clone, PartialEq)]
#[doc(hidden)]
pub struct DeError {
    /// `args[1]`, `auth.token`: relative to where reading started.
    pub path: String,
    pub kind: Kind,
    /// A field named by serde (missing, duplicated) below `path`.
    below: Option<String>,
    located: bool,
}

impl DeError {
    pub fn new(kind: Kind) -> Self {
        DeError { path: String::new(), kind, below: None, located: false }
    }

    /// An error about `field` of the value read.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        DeError { below: Some(field.into()), ..DeError::new(Kind::Invalid(message.into())) }
    }

    /// The same error, about a value below `prefix`.
    pub fn under(mut self, prefix: &str) -> Self {
        match self.located {
            true => self.path = join(prefix, &self.path),
            false => self.below = Some(join(prefix, self.below.as_deref().unwrap_or_default())),
        }
        if let (true, Kind::Unknown { key, .. }) = (self.located, &mut self.kind) {
            *key = join(prefix, key);
        }
        self
    }

    /// The same error, its path (and an unknown key's) written by `rename` where it says.
    pub fn renamed(mut self, rename: impl Fn(&str) -> Option<String>) -> Self {
        if let Some(path) = rename(&self.path) {
            self.path = path;
        }
        if let Kind::Unknown { key, .. } = &mut self.kind {
            *key = rename(key).unwrap_or_else(|| key.clone());
        }
        self
    }

    /// The path of the value, relative to where reading started.
    pub fn path(&self) -> String {
        match (self.located, &self.below) {
            (false, Some(below)) => below.clone(),
            _ => self.path.clone(),
        }
    }

    /// Gives the error the path of `node` unless a value below already did.
    fn at(mut self, path: &str, node: Node<'_>) -> Self {
        if self.located {
            return self;
        }
        self.located = true;
        self.path = match self.below.take() {
            Some(below) => join(path, &below),
            None => path.into(),
        };
        if let Kind::WrongType(expected) = &self.kind {
            self.kind = Kind::Invalid(must_be(expected, node.type_name()));
        }
        if let Kind::Unknown { key, .. } = &mut self.kind {
            *key = join(path, key);
        }
        self
    }

    /// The message after the quoted field.
    pub fn message(&self) -> String {
        match &self.kind {
            Kind::Invalid(message) => message.clone(),
            Kind::WrongType(expected) => format!("must be {expected}"),
            Kind::Unknown { key, known } => format!("has the unknown key `{key}`; the known keys are {}", known.join(", ")),
        }
    }
}

impl DeError {
    /// The error as one of the server `name` in `file`.
    pub fn into_server_error(self, file: &std::path::Path, name: &str) -> ConfigError {
        let (field, message) = (self.path(), self.message());
        match self.kind {
            Kind::Unknown { key, known } => ConfigError::UnknownKey { file: file.into(), server: Some(name.into()), key, known },
            _ => ConfigError::InvalidField { file: file.into(), server: name.into(), field, message },
        }
    }

    /// The error as one of a table outside the servers (`[audit]`).
    pub fn into_setting_error(self, file: &std::path::Path) -> ConfigError {
        let (field, message) = (self.path(), self.message());
        match self.kind {
            Kind::Unknown { key, known } => ConfigError::UnknownKey { file: file.into(), server: None, key, known },
            _ => ConfigError::InvalidSetting { file: file.into(), field, message },
        }
    }
}

impl Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {}", self.path, self.message())
    }
}

impl std::error::Error for DeError {}

/// serde's own words for the primitives, as a TOML user says them.
fn plain_words(expected: &str) -> &str {
    match expected {
        "a boolean" => "true or false",
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a sequence" => "an array",
        "a map" => "a table",
        other => other,
    }
}

fn must_be(expected: &str, found: &str) -> String {
    let expected = plain_words(expected);
    match expected.contains("{found}") {
        true => format!("must be {}", expected.replace("{found}", found)),
        false => format!("must be {expected}, not {found}"),
    }
}

fn join(path: &str, key: &str) -> String {
    match (path.is_empty(), key.is_empty()) {
        (true, _) => key.into(),
        (false, true) => path.into(),
        (false, false) => format!("{path}.{key}"),
    }
}

impl de::Error for DeError {
    fn custom<T: Display>(message: T) -> Self {
        DeError::new(Kind::Invalid(message.to_string()))
    }

    fn invalid_type(_: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        DeError::new(Kind::WrongType(expected.to_string()))
    }

    fn invalid_value(_: de::Unexpected<'_>, expected: &dyn de::Expected) -> Self {
        DeError::new(Kind::Invalid(format!("must be {}", plain_words(&expected.to_string()))))
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        DeError::custom(format!("is {variant:?}; write one of {}", expected.join(" | ")))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DeError::new(Kind::Unknown { key: field.into(), known: expected.to_vec() })
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::field(field, "is missing")
    }

    fn duplicate_field(field: &'static str) -> Self {
        DeError::field(field, "is given twice")
    }
}

/// Reads `T` from `node`; errors carry paths below `path`. `examples` says,
/// by struct name, what a table read as that struct looks like.
#[doc(hidden)]
pub fn from_node<'a, T: de::Deserialize<'a>>(
    node: Node<'a>,
    path: &str,
    examples: &'static [(&'static str, &'static str)],
) -> Result<T, DeError> {
    T::deserialize(De { node, path: path.into(), examples })
}

struct De<'a> {
    node: Node<'a>,
    path: String,
    examples: &'static [(&'static str, &'static str)],
}

impl<'a> De<'a> {
    fn child(&self, node: Node<'a>, path: String) -> De<'a> {
        De { node, path, examples: self.examples }
    }

    fn located<T>(&self, result: Result<T, DeError>) -> Result<T, DeError> {
        result.map_err(|error| error.at(&self.path, self.node))
    }

    fn table(&self) -> Option<Vec<(&'a str, Node<'a>)>> {
        match self.node.view() {
            View::Table(entries) => Some(entries),
            _ => None,
        }
    }

    fn not_a_table(&self, name: &str) -> DeError {
        let like = self.examples.iter().find(|(struct_name, _)| *struct_name == name).map(|(_, example)| *example);
        let message = match like {
            Some(example) => format!("must be a table, like {example}, not {}", self.node.type_name()),
            None => format!("must be a table, not {}", self.node.type_name()),
        };
        DeError::custom(message).at(&self.path, self.node)
    }
}

impl<'de> de::Deserializer<'de> for De<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match self.node.view() {
            View::Str(text) => visitor.visit_borrowed_str(text),
            View::Int(n) => visitor.visit_i64(n),
            View::Float(x) => visitor.visit_f64(x),
            View::Bool(b) => visitor.visit_bool(b),
            View::Text(text) => visitor.visit_string(text),
            View::Nothing => visitor.visit_unit(),
            View::Array(nodes) => visitor.visit_seq(Seq { de: &self, nodes: nodes.into_iter().enumerate() }),
            View::Table(entries) => visitor.visit_map(Map { de: &self, entries: entries.into_iter(), next: None }),
        };
        self.located(result)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let (path, node) = (self.path.clone(), self.node);
        visitor.visit_some(self).map_err(|error| error.at(&path, node))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, DeError> {
        let (path, node) = (self.path.clone(), self.node);
        visitor.visit_newtype_struct(self).map_err(|error| error.at(&path, node))
    }

    /// Only the struct's fields, or an error listing them.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let entries = self.table().ok_or_else(|| self.not_a_table(name))?;
        if let Some((key, _)) = entries.iter().find(|(key, _)| !fields.contains(key)) {
            return Err(DeError::unknown_field(key, fields).at(&self.path, self.node));
        }
        let result = visitor.visit_map(Map { de: &self, entries: entries.into_iter(), next: None });
        self.located(result)
    }

    /// A table tagged by its `type` key (keywords are read by `values::Word`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let entries = self.table().ok_or_else(|| self.not_a_table(name))?;
        let quoted: Vec<String> = variants.iter().map(|v| format!("{v:?}")).collect();
        let choices = match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        let tag_path = join(&self.path, "type");
        let tag = match entries.iter().find(|(key, _)| *key == "type") {
            None => return Err(DeError { path: tag_path, ..DeError::custom(format!("is missing; write type = {choices}")) }.done()),
            Some((_, node)) => match node.view() {
                View::Str(tag) if variants.contains(&tag) => tag,
                View::Str(other) => {
                    return Err(DeError { path: tag_path, ..DeError::custom(format!("is {other:?}; write {choices}")) }.done())
                }
                _ => return Err(DeError::new(Kind::WrongType("a string".into())).at(&tag_path, *node)),
            },
        };
        let fields: Vec<(&'de str, Node<'de>)> = entries.into_iter().filter(|(key, _)| *key != "type").collect();
        self.located(visitor.visit_enum(Tagged { de: &self, tag, fields }))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map identifier
    }
}

impl DeError {
    fn done(mut self) -> Self {
        self.located = true;
        self
    }
}

struct Seq<'s, 'de> {
    de: &'s De<'de>,
    nodes: std::iter::Enumerate<std::vec::IntoIter<Node<'de>>>,
}

impl<'de> de::SeqAccess<'de> for Seq<'_, 'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, DeError> {
        let Some((index, node)) = self.nodes.next() else { return Ok(None) };
        let path = format!("{}[{index}]", self.de.path);
        seed.deserialize(self.de.child(node, path.clone())).map(Some).map_err(|error| error.at(&path, node))
    }
}

struct Map<'s, 'de> {
    de: &'s De<'de>,
    entries: std::vec::IntoIter<(&'de str, Node<'de>)>,
    next: Option<(&'de str, Node<'de>)>,
}

impl<'de> de::MapAccess<'de> for Map<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, DeError> {
        let Some((key, node)) = self.entries.next() else { return Ok(None) };
        self.next = Some((key, node));
        let key_de: de::value::BorrowedStrDeserializer<'de, DeError> = de::value::BorrowedStrDeserializer::new(key);
        seed.deserialize(key_de).map(Some).map_err(|error| error.at(&self.de.path, self.de.node))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (key, node) = self.next.take().ok_or_else(|| DeError::custom("has a value without a key"))?;
        let path = join(&self.de.path, key);
        seed.deserialize(self.de.child(node, path.clone())).map_err(|error| error.at(&path, node))
    }
}

/// A table whose `type` key chose the variant `tag`; `fields` are the rest.
struct Tagged<'s, 'de> {
    de: &'s De<'de>,
    tag: &'de str,
    fields: Vec<(&'de str, Node<'de>)>,
}

impl<'de> de::EnumAccess<'de> for Tagged<'_, 'de> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let tag: de::value::BorrowedStrDeserializer<'de, DeError> = de::value::BorrowedStrDeserializer::new(self.tag);
        Ok((seed.deserialize(tag)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for Tagged<'_, 'de> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        match self.fields.first() {
            None => Ok(()),
            Some((key, _)) => Err(DeError::new(Kind::Unknown { key: (*key).into(), known: vec!["type"] })),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, DeError> {
        Err(DeError::custom(format!("cannot be read as {:?}", self.tag)))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, DeError> {
        Err(DeError::custom(format!("cannot be read as {:?}", self.tag)))
    }

    /// The variant's fields, or an error listing `type` and them; a missing
    /// one says what this variant needs ("basic auth needs username and password").
    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, DeError> {
        if let Some((key, _)) = self.fields.iter().find(|(key, _)| !fields.contains(key)) {
            let known = std::iter::once("type").chain(fields.iter().copied()).collect();
            return Err(DeError::new(Kind::Unknown { key: (*key).into(), known }));
        }
        let table = self.de.path.rsplit('.').next().unwrap_or_default().to_string();
        let result = visitor.visit_map(Map { de: self.de, entries: self.fields.into_iter(), next: None });
        result.map_err(|mut error| {
            if !error.located && error.kind == Kind::Invalid("is missing".into()) {
                error.kind = Kind::Invalid(format!("is missing; {} {table} needs {}", self.tag, fields.join(" and ")));
            }
            error
        })
    }
}

/// The fields of the struct `T` reads, in their declared order.
#[cfg(test)]
pub(crate) fn fields_of<'de, T: de::Deserialize<'de>>() -> &'static [&'static str] {
    struct Fields;
    impl<'de> de::Deserializer<'de> for Fields {
        type Error = DeError;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
            Err(DeError::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(self, _: &'static str, fields: &'static [&'static str], _: V) -> Result<V::Value, DeError> {
            Err(DeError::new(Kind::Unknown { key: String::new(), known: fields.to_vec() }))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    match T::deserialize(Fields).map_err(|error| error.kind) {
        Err(Kind::Unknown { known, .. }) => known.leak(),
        _ => &[],
    }
}
