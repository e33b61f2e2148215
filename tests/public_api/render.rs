//! Renders a crate's public API from rustdoc's JSON output as text
//! lines: one per item under every public path that reaches it, with the
//! fields, variants, methods and trait impls of each type under its
//! shortest path. Items hidden with `#[doc(hidden)]` and private ones are
//! not in rustdoc's output, so they are not in the surface.
//!
//! The facade re-exports the workspace's lower crates (`mcpvisor::config`
//! is `mcpvisor_wire::config`), and rustdoc's JSON of a crate holds only
//! its own items: a re-export of another crate's item is followed into that
//! crate's JSON (found by its path), so the surface is the same whichever
//! crate of the workspace an item lives in. Ids are `crate/id`.
//!
//! Only the parts of the format that have been stable across recent
//! versions are read; an unknown shape renders as `?` (and shows in the
//! diff) rather than failing.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde_json::Value;

/// The rustdoc JSON format versions this reader was checked against
/// (57: Rust 1.95).
pub const KNOWN_FORMATS: std::ops::RangeInclusive<u64> = 57..=57;

/// One crate's rustdoc JSON.
struct CrateDoc<'a> {
    index: &'a serde_json::Map<String, Value>,
    paths: &'a serde_json::Map<String, Value>,
    /// The external crates' names by their number in `paths`.
    crates: HashMap<String, String>,
    /// The id of each of its own items by path (`mcpvisor_wire::config::ServerConfig`).
    by_path: HashMap<String, String>,
}

impl<'a> CrateDoc<'a> {
    fn of(doc: &'a Value) -> (String, CrateDoc<'a>) {
        let index = doc["index"].as_object().expect("rustdoc JSON has an `index`");
        let paths = doc["paths"].as_object().expect("rustdoc JSON has `paths`");
        let name = index.get(&id_of(&doc["root"])).and_then(|root| root["name"].as_str()).unwrap_or("crate").to_string();
        let crates = doc["external_crates"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(number, c)| (number.clone(), c["name"].as_str().unwrap_or("?").to_string()))
            .collect();
        let by_path =
            paths.iter().filter(|(_, p)| p["crate_id"].as_u64() == Some(0)).map(|(id, p)| (joined(&p["path"]), id.clone())).collect();
        (name, CrateDoc { index, paths, crates, by_path })
    }
}

fn joined(path: &Value) -> String {
    path.as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>().join("::")
}

pub struct Surface<'a> {
    docs: BTreeMap<String, CrateDoc<'a>>,
    /// The crate whose JSON the item being read comes from: a bare id is its.
    here: RefCell<String>,
    /// The shortest public path of each item reached from the root.
    public: BTreeMap<String, String>,
    /// (sort key: the path the line is about, line).
    lines: BTreeSet<(String, String)>,
}

/// The lines of the public API of `root` (rustdoc's JSON, parsed), with
/// `others` the JSON of the crates it re-exports from, ordered by the path
/// each is about.
pub fn surface(root: &Value, others: &[Value]) -> Vec<String> {
    let (name, doc) = CrateDoc::of(root);
    let root_id = format!("{name}/{}", id_of(&root["root"]));
    let mut docs = BTreeMap::from([(name.clone(), doc)]);
    docs.extend(others.iter().map(CrateDoc::of));
    let mut surface = Surface { docs, here: RefCell::new(name), public: BTreeMap::new(), lines: BTreeSet::new() };
    let reached = surface.reach(&root_id);
    for (path, id) in &reached {
        surface.item(path, id);
    }
    surface.lines.into_iter().map(|(_, line)| line).collect()
}

fn id_of(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => panic!("an item id, not {other}"),
    }
}

fn kind(item: &Value) -> (&str, &Value) {
    match &item["inner"] {
        Value::Object(inner) => inner.iter().next().map(|(k, v)| (k.as_str(), v)).unwrap_or(("?", &Value::Null)),
        Value::String(k) => (k.as_str(), &Value::Null),
        _ => ("?", &Value::Null),
    }
}

impl<'a> Surface<'a> {
    fn emit(&mut self, key: &str, line: String) {
        self.lines.insert((key.to_string(), line));
    }

    /// The item `id`: `crate/id`, or a bare id of the crate being read.
    fn get(&self, id: &str) -> Option<&'a Value> {
        let (krate, local) = self.split(id);
        self.docs.get(&krate)?.index.get(&local)
    }

    fn split(&self, id: &str) -> (String, String) {
        match id.split_once('/') {
            Some((krate, local)) => (krate.to_string(), local.to_string()),
            None => (self.here.borrow().clone(), id.to_string()),
        }
    }

    /// The `crate/id` of a bare id of the crate being read, following it
    /// into the crate of the workspace that owns it; `None` for another
    /// crate's item (std, rmcp, ...) or an unknown id.
    fn resolve(&self, id: &str) -> Option<String> {
        let (krate, local) = self.split(id);
        let doc = self.docs.get(&krate)?;
        if doc.index.contains_key(&local) {
            return Some(format!("{krate}/{local}"));
        }
        let entry = doc.paths.get(&local)?;
        let owner = doc.crates.get(&entry["crate_id"].as_u64()?.to_string())?;
        let target = self.docs.get(owner)?.by_path.get(&joined(&entry["path"]))?;
        Some(format!("{owner}/{target}"))
    }

    /// Reads the items of `id`'s crate from now on.
    fn enter(&self, id: &str) {
        let (krate, _) = self.split(id);
        *self.here.borrow_mut() = krate;
    }

    /// Every (public path, item id) reachable from the root through public
    /// modules and re-exports; each item's docs go under its shortest path
    /// (the first in order among equals).
    fn reach(&mut self, root: &str) -> Vec<(String, String)> {
        let crate_name = self.get(root).and_then(|r| r["name"].as_str()).unwrap_or("crate").to_string();
        let mut reached = vec![(crate_name.clone(), root.to_string())];
        let mut queue = VecDeque::from([(crate_name, root.to_string())]);
        let mut expanded = BTreeSet::new();
        while let Some((path, id)) = queue.pop_front() {
            if !expanded.insert(id.clone()) {
                continue;
            }
            self.enter(&id);
            let Some(module) = self.get(&id) else { continue };
            let children: Vec<Value> = kind(module).1["items"].as_array().cloned().unwrap_or_default();
            for child in children.iter().map(id_of) {
                let Some(child) = self.resolve(&child) else { continue };
                let Some(item) = self.get(&child) else { continue };
                let (child_kind, inner) = kind(item);
                let entries: Vec<(String, String)> = match child_kind {
                    "use" if inner["is_glob"].as_bool() == Some(true) => {
                        // A glob re-export of a local module: its items, under this path.
                        let target = inner["id"].as_str().map(str::to_string).or_else(|| inner["id"].as_u64().map(|n| n.to_string()));
                        match target.and_then(|target| self.resolve(&target)) {
                            Some(target) if self.get(&target).is_some() => {
                                queue.push_back((path.clone(), target));
                                continue;
                            }
                            _ => {
                                self.emit(&path, format!("pub use {path}::{}::*", inner["source"].as_str().unwrap_or("?")));
                                continue;
                            }
                        }
                    }
                    "use" => {
                        let name = inner["name"].as_str().unwrap_or("?");
                        let target = inner.get("id").filter(|v| !v.is_null()).map(id_of);
                        match target.as_deref().and_then(|target| self.resolve(target)) {
                            Some(target) if self.get(&target).is_some() => vec![(format!("{path}::{name}"), target)],
                            _ => {
                                let source = target
                                    .as_deref()
                                    .map(|t| self.external_path(t))
                                    .unwrap_or_else(|| inner["source"].as_str().unwrap_or("?").to_string());
                                self.emit(&format!("{path}::{name}"), format!("pub use {path}::{name} = {source}"));
                                continue;
                            }
                        }
                    }
                    "impl" => continue,
                    _ => vec![(format!("{path}::{}", item["name"].as_str().unwrap_or("?")), child)],
                };
                for (child_path, target) in entries {
                    // The shortest path, and the first in order among the shortest, so
                    // that the order of the re-exports in the source changes nothing.
                    let shorter = |known: &String| (child_path.matches("::").count(), &child_path) < (known.matches("::").count(), known);
                    if self.public.get(&target).is_none_or(shorter) {
                        self.public.insert(target.clone(), child_path.clone());
                    }
                    if self.get(&target).map(|t| kind(t).0) == Some("module") {
                        queue.push_back((child_path.clone(), target.clone()));
                    }
                    reached.push((child_path, target));
                }
            }
        }
        reached
    }

    fn external_path(&self, id: &str) -> String {
        let (krate, local) = self.split(id);
        match self.docs.get(&krate).and_then(|doc| doc.paths.get(&local)).and_then(|p| p["path"].as_array()) {
            Some(parts) => parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("::"),
            None => "?".into(),
        }
    }

    /// The path a type is named by: its public path when it is this
    /// crate's, else where rustdoc says it lives.
    fn type_path(&self, id: &Value, written: &str) -> String {
        let Some(id) = (!id.is_null()).then(|| id_of(id)) else { return written.to_string() };
        if let Some(public) = self.resolve(&id).and_then(|global| self.public.get(&global)) {
            return public.clone();
        }
        let (krate, local) = self.split(&id);
        match self.docs.get(&krate).and_then(|doc| doc.paths.get(&local)) {
            Some(_) => self.external_path(&id),
            None => written.to_string(),
        }
    }

    fn item(&mut self, path: &str, id: &str) {
        self.enter(id);
        let Some(item) = self.get(id) else { return };
        let (item_kind, inner) = kind(item);
        let canonical = self.public.get(id).map(String::as_str) == Some(path) || path.split("::").count() == 1;
        let generics = self.generics(&inner["generics"]);
        let header = match item_kind {
            "module" => format!("pub mod {path}"),
            "struct" | "enum" | "union" | "trait" => {
                let word = if item_kind == "trait" { "trait" } else { item_kind };
                format!("pub {word} {path}{generics}")
            }
            "function" => format!("pub {}", self.function(path, inner)),
            "constant" => format!("pub const {path}: {}", self.ty(&inner["type"])),
            "static" => format!("pub static {path}: {}", self.ty(&inner["type"])),
            "type_alias" => format!("pub type {path}{generics} = {}", self.ty(&inner["type"])),
            "macro" | "proc_macro" => format!("pub macro {path}"),
            other => format!("pub {other} {path}"),
        };
        self.emit(path, header);
        if !canonical {
            return;
        }
        match item_kind {
            "struct" => {
                self.fields(path, &inner["kind"]);
                self.impls(path, &inner["impls"]);
            }
            "union" => {
                self.fields(path, &serde_json::json!({"plain": {"fields": inner["fields"].clone()}}));
                self.impls(path, &inner["impls"]);
            }
            "enum" => {
                for variant in inner["variants"].as_array().into_iter().flatten().map(id_of) {
                    let Some(v) = self.get(&variant) else { continue };
                    let name = format!("{path}::{}", v["name"].as_str().unwrap_or("?"));
                    let vkind = &kind(v).1["kind"];
                    let shape = match vkind {
                        Value::Object(o) if o.contains_key("tuple") => {
                            let types: Vec<String> = o["tuple"].as_array().into_iter().flatten().map(|f| self.field_type(f)).collect();
                            format!("({})", types.join(", "))
                        }
                        _ => String::new(),
                    };
                    self.emit(&name, format!("pub variant {name}{shape}"));
                    if let Some(fields) = vkind.get("struct") {
                        self.fields(&name, &serde_json::json!({"plain": fields.clone()}));
                    }
                }
                self.impls(path, &inner["impls"]);
            }
            "trait" => {
                for member in inner["items"].as_array().into_iter().flatten().map(id_of) {
                    let Some(m) = self.get(&member) else { continue };
                    let name = format!("{path}::{}", m["name"].as_str().unwrap_or("?"));
                    let (mkind, minner) = kind(m);
                    let line = match mkind {
                        "function" => self.function(&name, minner),
                        "assoc_type" => format!("type {name}"),
                        "assoc_const" => format!("const {name}: {}", self.ty(&minner["type"])),
                        other => format!("{other} {name}"),
                    };
                    self.emit(&name, format!("pub trait-item {line}"));
                }
            }
            _ => {}
        }
    }

    fn field_type(&self, field: &Value) -> String {
        if field.is_null() {
            return "_".into();
        }
        self.get(&id_of(field)).map(|f| self.ty(kind(f).1)).unwrap_or_else(|| "?".into())
    }

    /// The public fields of a struct kind (`plain` or `tuple`).
    fn fields(&mut self, path: &str, struct_kind: &Value) {
        let named = struct_kind.get("plain").map(|p| &p["fields"]);
        for (position, field) in named.and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(f) = self.get(&id_of(field)) else { continue };
            let name = f["name"].as_str().map(str::to_string).unwrap_or_else(|| position.to_string());
            let line = format!("pub {path}::{name}: {}", self.ty(kind(f).1));
            self.emit(&format!("{path}::{name}"), line);
        }
        for (position, field) in struct_kind.get("tuple").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if !field.is_null() {
                let line = format!("pub {path}::{position}: {}", self.field_type(field));
                self.emit(&format!("{path}::{position}"), line);
            }
        }
    }

    /// Inherent methods and the trait impls written in this crate (auto
    /// traits and blanket impls are left out: they follow from the rest).
    fn impls(&mut self, path: &str, impls: &Value) {
        for id in impls.as_array().into_iter().flatten().map(id_of) {
            let Some(imp) = self.get(&id) else { continue };
            let inner = kind(imp).1;
            if inner["is_synthetic"].as_bool() == Some(true) || !inner["blanket_impl"].is_null() {
                continue;
            }
            let generics = self.generics(&inner["generics"]);
            if inner["trait"].is_null() {
                for member in inner["items"].as_array().into_iter().flatten().map(id_of) {
                    let Some(m) = self.get(&member) else { continue };
                    let name = format!("{path}::{}", m["name"].as_str().unwrap_or("?"));
                    let (mkind, minner) = kind(m);
                    let line = match mkind {
                        "function" => format!("pub {}", self.function(&name, minner)),
                        "assoc_const" | "constant" => format!("pub const {name}: {}", self.ty(&minner["type"])),
                        other => format!("pub {other} {name}"),
                    };
                    self.emit(&name, line);
                }
            } else {
                let negative = if inner["is_negative"].as_bool() == Some(true) { "!" } else { "" };
                let line = format!("impl{generics} {negative}{} for {}", self.path_of(&inner["trait"]), self.ty(&inner["for"]));
                // After the type's own items.
                self.emit(&format!("{path}::~"), line);
            }
        }
    }

    fn function(&self, path: &str, inner: &Value) -> String {
        let header = &inner["header"];
        let mut words = String::new();
        for (flag, word) in [("is_const", "const "), ("is_async", "async "), ("is_unsafe", "unsafe ")] {
            if header[flag].as_bool() == Some(true) {
                words.push_str(word);
            }
        }
        let sig = inner.get("sig").or_else(|| inner.get("decl")).unwrap_or(&Value::Null);
        let inputs: Vec<String> = sig["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|pair| {
                let name = pair[0].as_str().unwrap_or("_");
                let ty = &pair[1];
                if name == "self" {
                    if ty.get("generic").and_then(Value::as_str) == Some("Self") {
                        return "self".into();
                    }
                    if let Some(r) = ty.get("borrowed_ref") {
                        if r["type"].get("generic").and_then(Value::as_str) == Some("Self") {
                            let lifetime = r["lifetime"].as_str().map(|l| format!("{l} ")).unwrap_or_default();
                            let mutable = if r["is_mutable"].as_bool() == Some(true) { "mut " } else { "" };
                            return format!("&{lifetime}{mutable}self");
                        }
                    }
                }
                format!("{name}: {}", self.ty(ty))
            })
            .collect();
        let output = match &sig["output"] {
            Value::Null => String::new(),
            ty => format!(" -> {}", self.ty(ty)),
        };
        let generics = self.generics(&inner["generics"]);
        let bounds = self.where_clause(&inner["generics"]);
        format!("{words}fn {path}{generics}({}){output}{bounds}", inputs.join(", "))
    }

    /// `<'a, T: Bound>`; parameters made from `impl Trait` arguments are left out.
    fn generics(&self, generics: &Value) -> String {
        let params: Vec<String> = generics["params"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|param| {
                let name = param["name"].as_str().unwrap_or("?");
                let kind = &param["kind"];
                if let Some(ty) = kind.get("type") {
                    if ty["is_synthetic"].as_bool() == Some(true) {
                        return None;
                    }
                    let bounds = self.bounds(&ty["bounds"]);
                    return Some(if bounds.is_empty() { name.to_string() } else { format!("{name}: {bounds}") });
                }
                if let Some(c) = kind.get("const") {
                    return Some(format!("const {name}: {}", self.ty(&c["type"])));
                }
                Some(name.to_string())
            })
            .collect();
        if params.is_empty() {
            String::new()
        } else {
            format!("<{}>", params.join(", "))
        }
    }

    fn where_clause(&self, generics: &Value) -> String {
        let predicates: Vec<String> = generics["where_predicates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("bound_predicate").map(|b| format!("{}: {}", self.ty(&b["type"]), self.bounds(&b["bounds"]))))
            .collect();
        if predicates.is_empty() {
            String::new()
        } else {
            format!(" where {}", predicates.join(", "))
        }
    }

    fn bounds(&self, bounds: &Value) -> String {
        let rendered: Vec<String> = bounds
            .as_array()
            .into_iter()
            .flatten()
            .map(|bound| {
                if let Some(t) = bound.get("trait_bound") {
                    let maybe = if t["modifier"].as_str() == Some("maybe") { "?" } else { "" };
                    format!("{maybe}{}", self.path_of(&t["trait"]))
                } else if let Some(l) = bound.get("outlives").and_then(Value::as_str) {
                    l.to_string()
                } else {
                    "?".into()
                }
            })
            .collect();
        rendered.join(" + ")
    }

    /// A path with its generic arguments (`Vec<T>`, `Fn(&str) -> bool`).
    fn path_of(&self, path: &Value) -> String {
        let written = path.get("path").or_else(|| path.get("name")).and_then(Value::as_str).unwrap_or("?");
        let mut rendered = self.type_path(&path["id"], written);
        let args = &path["args"];
        if let Some(angle) = args.get("angle_bracketed") {
            let mut parts: Vec<String> = angle["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|arg| match arg {
                    Value::Object(o) if o.contains_key("type") => self.ty(&o["type"]),
                    Value::Object(o) if o.contains_key("lifetime") => o["lifetime"].as_str().unwrap_or("'?").to_string(),
                    Value::Object(o) if o.contains_key("const") => o["const"]["expr"].as_str().unwrap_or("?").to_string(),
                    _ => "_".into(),
                })
                .collect();
            for constraint in angle["constraints"].as_array().into_iter().flatten() {
                let name = constraint["name"].as_str().unwrap_or("?");
                let binding = &constraint["binding"];
                if let Some(ty) = binding.get("equality").and_then(|e| e.get("type")) {
                    parts.push(format!("{name} = {}", self.ty(ty)));
                } else if let Some(bounds) = binding.get("constraint") {
                    parts.push(format!("{name}: {}", self.bounds(bounds)));
                }
            }
            if !parts.is_empty() {
                rendered.push_str(&format!("<{}>", parts.join(", ")));
            }
        } else if let Some(paren) = args.get("parenthesized") {
            let inputs: Vec<String> = paren["inputs"].as_array().into_iter().flatten().map(|t| self.ty(t)).collect();
            rendered.push_str(&format!("({})", inputs.join(", ")));
            if !paren["output"].is_null() {
                rendered.push_str(&format!(" -> {}", self.ty(&paren["output"])));
            }
        }
        rendered
    }

    fn ty(&self, ty: &Value) -> String {
        let Value::Object(o) = ty else {
            return if ty.as_str() == Some("infer") { "_".into() } else { "?".into() };
        };
        let Some((kind, inner)) = o.iter().next() else { return "?".into() };
        match kind.as_str() {
            "resolved_path" => self.path_of(inner),
            "generic" | "primitive" => inner.as_str().unwrap_or("?").to_string(),
            "borrowed_ref" => {
                let lifetime = inner["lifetime"].as_str().map(|l| format!("{l} ")).unwrap_or_default();
                let mutable = if inner["is_mutable"].as_bool() == Some(true) { "mut " } else { "" };
                format!("&{lifetime}{mutable}{}", self.ty(&inner["type"]))
            }
            "raw_pointer" => {
                let mutable = if inner["is_mutable"].as_bool() == Some(true) { "mut" } else { "const" };
                format!("*{mutable} {}", self.ty(&inner["type"]))
            }
            "tuple" => {
                let parts: Vec<String> = inner.as_array().into_iter().flatten().map(|t| self.ty(t)).collect();
                format!("({})", parts.join(", "))
            }
            "slice" => format!("[{}]", self.ty(inner)),
            "array" => format!("[{}; {}]", self.ty(&inner["type"]), inner["len"].as_str().unwrap_or("?")),
            "impl_trait" => format!("impl {}", self.bounds(inner)),
            "dyn_trait" => {
                let mut traits: Vec<String> = inner["traits"].as_array().into_iter().flatten().map(|t| self.path_of(&t["trait"])).collect();
                if let Some(lifetime) = inner["lifetime"].as_str() {
                    traits.push(lifetime.to_string());
                }
                format!("dyn {}", traits.join(" + "))
            }
            "qualified_path" => {
                let name = inner["name"].as_str().unwrap_or("?");
                let self_type = self.ty(&inner["self_type"]);
                match inner.get("trait").filter(|t| !t.is_null()) {
                    Some(t) => format!("<{self_type} as {}>::{name}", self.path_of(t)),
                    None => format!("{self_type}::{name}"),
                }
            }
            "function_pointer" => {
                let sig = inner.get("sig").or_else(|| inner.get("decl")).unwrap_or(&Value::Null);
                let inputs: Vec<String> = sig["inputs"].as_array().into_iter().flatten().map(|p| self.ty(&p[1])).collect();
                let output = if sig["output"].is_null() { String::new() } else { format!(" -> {}", self.ty(&sig["output"])) };
                format!("fn({}){output}", inputs.join(", "))
            }
            other => format!("?{other}"),
        }
    }
}
