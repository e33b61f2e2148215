//! Skills (SEP-2640, `io.modelcontextprotocol/skills`): `skills/list`,
//! `skills/get`, and their files through `resources/read`:
//!
//! | skill | files | behaviour |
//! |---|---|---|
//! | `release-notes` | `SKILL.md`, `references/TEMPLATE.md` | an ordinary skill |
//! | `stale-notes` | `SKILL.md` | misbehaves on purpose: its entry lists the digest and size of an older `SKILL.md` than the one served (a skill changed after it was listed) |
//!
//! Served with `--skills` only. The files are not in `resources/list` (the
//! listing of skills is `skills/list`); digests are computed here, from the
//! served bytes.

use serde_json::{json, Value};

use super::rpc::ErrorObject;

const RELEASE_NOTES: &str = "skill://release-notes/SKILL.md";
const RELEASE_NOTES_MD: &str = "---\nname: release-notes\ndescription: Write release notes for a version from its changes\n\
    license: MIT\nmetadata:\n  version: \"1.0\"\n---\n\n# Release notes\n\nList the changes under Added, Changed and Fixed, one line each, \
    newest first. Use the layout in `references/TEMPLATE.md`. End with the sentence: Thanks to everyone who contributed.\n";
const TEMPLATE: &str = "skill://release-notes/references/TEMPLATE.md";
const TEMPLATE_MD: &str = "## VERSION (DATE)\n\n### Added\n\n### Changed\n\n### Fixed\n";
const STALE_NOTES: &str = "skill://stale-notes/SKILL.md";
const STALE_NOTES_MD: &str = "---\nname: stale-notes\ndescription: Release notes, as this skill was last listed\n---\n\nThe new body.\n";
/// What `stale-notes` was when its entry was made.
const STALE_NOTES_LISTED: &str = "---\nname: stale-notes\ndescription: Release notes, as this skill was last listed\n---\n\nOld.\n";

fn digest(text: &str) -> String {
    let hash = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!("sha256:{}", hash.as_ref().iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

fn file(uri: &str, listed: &str) -> Value {
    json!({"uri": uri, "digest": digest(listed), "size": listed.len()})
}

/// Every skill's entry, as `skills/list` gives them.
pub fn entries() -> Vec<Value> {
    vec![
        json!({
            "uri": RELEASE_NOTES,
            "frontmatter": {"name": "release-notes", "description": "Write release notes for a version from its changes",
                            "license": "MIT", "metadata": {"version": "1.0"}},
            "resources": [file(RELEASE_NOTES, RELEASE_NOTES_MD), file(TEMPLATE, TEMPLATE_MD)],
        }),
        json!({
            "uri": STALE_NOTES,
            "frontmatter": {"name": "stale-notes", "description": "Release notes, as this skill was last listed"},
            "resources": [file(STALE_NOTES, STALE_NOTES_LISTED)],
        }),
    ]
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is `uri`; -32602 for any other.
pub fn get(uri: &str) -> Result<Value, ErrorObject> {
    let skill = entries().into_iter().find(|entry| entry["uri"] == uri);
    let skill = skill.ok_or_else(|| ErrorObject::invalid_params(format!("No skill is served at {uri}")))?;
    Ok(json!({"skill": skill, "ttlMs": 0, "cacheScope": "private"}))
}

/// `capabilities` of `initialize` or `server/discover`, announcing the extension when `skills`.
pub fn announce(mut capabilities: Value, skills: bool) -> Value {
    if skills {
        capabilities["extensions"] = json!({"io.modelcontextprotocol/skills": {}});
    }
    capabilities
}

/// `resources/read` of a skill's file; `None` when `uri` is none.
pub fn read(uri: &str) -> Option<Value> {
    let contents = contents(uri)?;
    Some(json!({ "contents": [contents] }))
}

/// The content of a skill's file, or `None` when `uri` is none.
fn contents(uri: &str) -> Option<Value> {
    let text = match uri {
        RELEASE_NOTES => RELEASE_NOTES_MD,
        TEMPLATE => TEMPLATE_MD,
        STALE_NOTES => STALE_NOTES_MD,
        _ => return None,
    };
    Some(json!({"uri": uri, "mimeType": "text/markdown", "text": text}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_describe_the_served_files_except_the_stale_one() {
        for entry in entries() {
            for listed in entry["resources"].as_array().unwrap() {
                let uri = listed["uri"].as_str().unwrap();
                let served = contents(uri).unwrap()["text"].as_str().unwrap().to_string();
                assert_eq!(listed["digest"] == digest(&served), uri != STALE_NOTES, "{uri}");
            }
            assert_eq!(get(entry["uri"].as_str().unwrap()).unwrap()["skill"], entry);
        }
        assert_eq!(get("skill://nope/SKILL.md").unwrap_err().code, super::super::rpc::INVALID_PARAMS);
    }
}
