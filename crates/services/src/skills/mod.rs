//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`) as
//! data: a server's skill entries and the checks a host makes on what it
//! reads. The requests are typed operations of the actors (`actors::skills`,
//! a layer up, which uses these types); `Handle::list_skills` and friends are
//! the embedder's door.
//!
//! Invariants:
//! - discovery never reads a file: an entry ([`Skill`]) carries the
//!   frontmatter and the manifest (`uri`, `digest`, `size` of every file),
//!   so listing is enough to show a skill; `SKILL.md` is read only when the
//!   skill is loaded, a supporting file only when it is read;
//! - content is used only once verified against the held entry: its byte
//!   length equals the listed `size`, its SHA-256 the listed `digest`, and
//!   for `SKILL.md` its YAML frontmatter equals the entry's field by field;
//!   a file the manifest does not list is refused ([`Mismatch`]);
//! - an entry is refused before any read when it breaks the manifest's
//!   rules or the per-skill limits ([`MAX_FILES`], [`MAX_TOTAL_BYTES`]); a
//!   `"dynamic"` skill (no digests) is held to the size limit by what is read;
//! - a skill is named by its server and its `uri`, never by its name alone
//!   (names repeat across servers and even within one).

mod frontmatter;

use ring::digest::{digest, SHA256};
use rmcp::model::{JsonObject, ReadResourceResult, ResourceContents};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::CallError;
pub use frontmatter::{compare as compare_frontmatter, split as split_frontmatter};

/// The extension's identifier in a server's `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The file at a skill's root that every skill has.
pub const SKILL_FILE: &str = "SKILL.md";
/// Files one skill may list (SKILL.md included); every host accepts this many.
pub const MAX_FILES: usize = 512;
/// Bytes of one skill's files together.
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;

/// One skill as a server lists it (`skills/list`, `skills/get`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// The URI of its `SKILL.md`; with the server's name, the skill's identity.
    pub uri: String,
    /// The YAML frontmatter of its `SKILL.md`, as JSON: `name` and
    /// `description` at least, every other field as the author wrote it.
    pub frontmatter: JsonObject,
    pub resources: SkillFiles,
}

/// A skill's manifest: every file with its digest and size, or `"dynamic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SkillFiles {
    Listed(Vec<SkillFile>),
    /// Generated content: no digests to verify against.
    Dynamic(Dynamic),
}

/// The string `"dynamic"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dynamic;

impl Serialize for Dynamic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("dynamic")
    }
}

impl<'de> Deserialize<'de> for Dynamic {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "dynamic" => Ok(Dynamic),
            other => Err(serde::de::Error::custom(format!("`resources` is \"{other}\", neither a list of files nor \"dynamic\""))),
        }
    }
}

/// One file of a skill's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits, of the file's raw bytes.
    pub digest: String,
    /// The file's length in bytes.
    pub size: u64,
}

impl Skill {
    /// An entry from a listing, or why it is not a skill entry (then it is
    /// never loaded): not the entry shape, a `uri` not ending in
    /// `/SKILL.md`, no `name` or `description`, or a name that is not the
    /// last segment of the skill's path.
    pub fn from_value(value: Value) -> Result<Skill, String> {
        let uri = value.get("uri").and_then(Value::as_str).unwrap_or("(no uri)").to_string();
        let skill: Skill = serde_json::from_value(value).map_err(|e| format!("entry {uri} is not a skill entry: {e}"))?;
        let Some(root) = skill.uri.strip_suffix(&format!("/{SKILL_FILE}")) else {
            return Err(format!("entry {uri} does not end in /{SKILL_FILE}"));
        };
        let text = |field: &str| skill.frontmatter.get(field).and_then(Value::as_str).filter(|text| !text.is_empty());
        let (Some(name), Some(_)) = (text("name"), text("description")) else {
            return Err(format!("entry {uri} has no `name` and `description` in its frontmatter"));
        };
        if root.rsplit('/').next() != Some(name) {
            return Err(format!("entry {uri} names its skill `{name}`, which is not the last segment of its path"));
        }
        Ok(skill)
    }

    /// The skill's name (its frontmatter's `name`).
    pub fn name(&self) -> &str {
        self.frontmatter.get("name").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn description(&self) -> &str {
        self.frontmatter.get("description").and_then(Value::as_str).unwrap_or_default()
    }

    /// The skill's directory: its `uri` without `/SKILL.md`.
    pub fn root(&self) -> &str {
        self.uri.strip_suffix(&format!("/{SKILL_FILE}")).unwrap_or(&self.uri)
    }

    /// The URI of `path`, relative to the skill's root (`references/FORMS.md`).
    /// An absolute URI is taken as it is.
    pub fn resolve(&self, path: &str) -> String {
        if path.contains("://") {
            return path.to_string();
        }
        format!("{}/{}", self.root(), path.trim_start_matches("./").trim_start_matches('/'))
    }

    /// Whether `uri` is the skill's `SKILL.md` or a file under its root.
    fn owns(&self, uri: &str) -> bool {
        uri == self.uri || (uri.strip_prefix(self.root()).is_some_and(|rest| rest.starts_with('/')) && !uri.contains("/../"))
    }

    /// The files of the manifest, if it lists them.
    pub fn files(&self) -> Option<&[SkillFile]> {
        match &self.resources {
            SkillFiles::Listed(files) => Some(files),
            SkillFiles::Dynamic(_) => None,
        }
    }

    /// Why the entry cannot be loaded, checked from the entry alone before
    /// any read: a manifest without `SKILL.md`, a file outside the skill, a
    /// malformed digest, more than [`MAX_FILES`] files or more than
    /// [`MAX_TOTAL_BYTES`] bytes.
    pub fn check_manifest(&self) -> Result<(), String> {
        let Some(files) = self.files() else { return Ok(()) };
        if files.len() > MAX_FILES {
            return Err(format!("it lists {} files, over the limit of {MAX_FILES}", files.len()));
        }
        let total: u64 = files.iter().map(|file| file.size).fold(0, u64::saturating_add);
        if total > MAX_TOTAL_BYTES {
            return Err(format!("its files total {total} bytes, over the limit of {MAX_TOTAL_BYTES}"));
        }
        if !files.iter().any(|file| file.uri == self.uri) {
            return Err(format!("its manifest does not list its own {SKILL_FILE}"));
        }
        if let Some(outside) = files.iter().find(|file| !self.owns(&file.uri)) {
            return Err(format!("its manifest lists {}, which is outside the skill's directory {}", outside.uri, self.root()));
        }
        if let Some(bad) = files.iter().find(|file| !well_formed_digest(&file.digest)) {
            return Err(format!("the digest of {} is not `sha256:` and 64 lowercase hex digits", bad.uri));
        }
        Ok(())
    }
}

fn well_formed_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// `sha256:` and the lowercase hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    let hash = digest(&SHA256, bytes);
    let hex: String = hash.as_ref().iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// Why read content was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mismatch {
    #[error("it is {read} bytes long, the manifest says {listed}")]
    Size { listed: u64, read: u64 },
    #[error("its digest is {read}, the manifest says {listed}")]
    Digest { listed: String, read: String },
    #[error("its frontmatter differs from the listed one: {0}")]
    Frontmatter(String),
    #[error("the skill's manifest does not list it")]
    Unlisted,
    #[error("it is over the skill's limit of {MAX_TOTAL_BYTES} bytes")]
    TooLarge,
    #[error("{0}")]
    Unreadable(String),
}

/// What loading or reading a skill's file came to, when not its content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("server `{server}` has no skill {skill}; list its skills to see which it serves")]
    Unknown { server: String, skill: String },
    #[error("skill {skill} of server `{server}` was not loaded: {why}; the server's entry for it must be fixed")]
    Refused { server: String, skill: String, why: String },
    #[error(
        "{file} of skill {skill} (server `{server}`) failed verification and was not used: {mismatch}. The skill may have \
         changed since it was listed: list the server's skills again and retry; if it fails again, the server serves it wrongly"
    )]
    Unverified { server: String, skill: String, file: String, mismatch: Mismatch },
}

/// A skill whose `SKILL.md` was read and verified.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSkill {
    pub server: String,
    /// The entry it was verified against (held while the skill is used).
    pub skill: Skill,
    /// The whole `SKILL.md`, frontmatter included.
    pub text: String,
}

impl LoadedSkill {
    /// The instructions: `SKILL.md` after its frontmatter.
    pub fn body(&self) -> &str {
        split_frontmatter(&self.text).map_or(self.text.as_str(), |(_, body)| body)
    }
}

/// The raw bytes of `uri` in a `resources/read` answer (text as UTF-8,
/// blobs decoded from Base64).
pub fn content_bytes(result: &ReadResourceResult, uri: &str) -> Result<Vec<u8>, Mismatch> {
    fn of(contents: &ResourceContents) -> Option<&str> {
        match contents {
            ResourceContents::TextResourceContents { uri, .. } | ResourceContents::BlobResourceContents { uri, .. } => Some(uri.as_str()),
            _ => None,
        }
    }
    let found = match result.contents.as_slice() {
        [only] => Some(only),
        all => all.iter().find(|contents| of(contents) == Some(uri)),
    };
    match found {
        Some(ResourceContents::TextResourceContents { text, .. }) => Ok(text.clone().into_bytes()),
        Some(ResourceContents::BlobResourceContents { blob, .. }) => {
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, blob)
                .map_err(|e| Mismatch::Unreadable(format!("its Base64 content cannot be decoded: {e}")))
        }
        Some(_) => Err(Mismatch::Unreadable("its content is of a kind this client does not know".into())),
        None => Err(Mismatch::Unreadable(format!("the answer holds no content for {uri}"))),
    }
}

/// Checks `bytes`, read from `uri`, against the skill's manifest: listed,
/// of the listed size and digest (a dynamic skill: under the skill and
/// within [`MAX_TOTAL_BYTES`]).
pub fn verify_file(skill: &Skill, uri: &str, bytes: &[u8]) -> Result<(), Mismatch> {
    let Some(files) = skill.files() else {
        return match (skill.owns(uri), bytes.len() as u64 <= MAX_TOTAL_BYTES) {
            (false, _) => Err(Mismatch::Unlisted),
            (true, false) => Err(Mismatch::TooLarge),
            (true, true) => Ok(()),
        };
    };
    let listed = files.iter().find(|file| file.uri == uri).ok_or(Mismatch::Unlisted)?;
    let read = bytes.len() as u64;
    if read != listed.size {
        return Err(Mismatch::Size { listed: listed.size, read });
    }
    let digest = sha256_digest(bytes);
    if digest != listed.digest {
        return Err(Mismatch::Digest { listed: listed.digest.clone(), read: digest });
    }
    Ok(())
}

/// Checks a `SKILL.md` read for `skill`: the file checks of
/// [`verify_file`], then its frontmatter against the entry's. Answers its text.
pub fn verify_skill_md(skill: &Skill, bytes: Vec<u8>) -> Result<String, Mismatch> {
    verify_file(skill, &skill.uri, &bytes)?;
    let text = String::from_utf8(bytes).map_err(|_| Mismatch::Unreadable(format!("{SKILL_FILE} is not UTF-8 text")))?;
    let (yaml, _) = split_frontmatter(&text).ok_or_else(|| Mismatch::Frontmatter("the file has no `---` frontmatter block".into()))?;
    compare_frontmatter(yaml, &skill.frontmatter).map_err(Mismatch::Frontmatter)?;
    Ok(text)
}

#[cfg(test)]
mod tests;
