//! The skills extension's operations on one server (SEP-2640; the data and
//! its checks are [`mcpvisor_services::skills`]). Each is an [`Operation`], so it
//! shares the connection's bounds and time-outs, and a server that did not
//! announce the extension is not asked at all (`CallError::Unsupported`).
//!
//! - [`ListSkills`]: every entry, following `nextCursor`; reads no file.
//!   An entry that is not a skill entry is left out with a warning.
//! - [`GetSkill`]: one entry by its `SKILL.md` URI (a refreshed one, or a
//!   skill the listing did not show).
//! - [`LoadSkill`]: reads the entry's `SKILL.md` and verifies it.
//! - [`ReadSkillFile`]: reads one file of a skill and verifies it against
//!   the entry held since the skill was loaded.
//!
//! The last two answer `Ok(Err(SkillError))` when the content was refused.

use actix::prelude::*;
use rmcp::model::ReadResourceResult;
use serde_json::{json, Value};

use super::operation::{Flow, Operation, Requester};
use crate::error::CallError;
use crate::protocol::methods;
use mcpvisor_services::skills::{self, LoadedSkill, Mismatch, Skill, SkillError, EXTENSION};

/// Content that was read but may have been refused.
pub type Verified<T> = Result<T, SkillError>;

/// Every skill the server lists.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "Result<Vec<Skill>, CallError>")]
pub struct ListSkills;

impl Operation for ListSkills {
    type Output = Vec<Skill>;
    const EXTENSION: Option<&'static str> = Some(EXTENSION);
    const METHOD: &'static str = methods::SKILLS_LIST;
    fn run(self, requester: Requester) -> Flow<Vec<Skill>> {
        Box::pin(async move {
            let entries: Vec<Value> = requester.list_all(methods::SKILLS_LIST, "skills").await?;
            let skills = entries.into_iter().filter_map(|entry| match Skill::from_value(entry) {
                Ok(skill) => Some(skill),
                Err(why) => {
                    tracing::warn!(server = requester.server(), "skills/list: {why}; the entry is left out");
                    None
                }
            });
            Ok(skills.collect())
        })
    }
}

/// One skill's entry, by the URI of its `SKILL.md`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Skill, CallError>")]
pub struct GetSkill {
    pub uri: String,
}

impl Operation for GetSkill {
    type Output = Skill;
    const EXTENSION: Option<&'static str> = Some(EXTENSION);
    const METHOD: &'static str = methods::SKILLS_GET;
    fn run(self, requester: Requester) -> Flow<Skill> {
        let label = format!("{} {}", methods::SKILLS_GET, self.uri);
        Box::pin(async move {
            let answer: Value = requester.request(methods::SKILLS_GET, json!({ "uri": self.uri }), label.clone()).await?;
            let entry = answer.get("skill").cloned().unwrap_or(Value::Null);
            Skill::from_value(entry).map_err(|message| CallError::Protocol { server: requester.server().into(), tool: label, message })
        })
    }
}

/// Loads a skill: reads its `SKILL.md` and verifies it against `skill`.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Verified<LoadedSkill>, CallError>")]
pub struct LoadSkill {
    pub skill: Skill,
}

impl Operation for LoadSkill {
    type Output = Verified<LoadedSkill>;
    const CAPABILITY: Option<&'static str> = Some("resources");
    const METHOD: &'static str = methods::RESOURCES_READ;
    fn run(self, requester: Requester) -> Flow<Verified<LoadedSkill>> {
        Box::pin(async move {
            let skill = self.skill;
            let server = requester.server().to_string();
            if let Err(why) = skill.check_manifest() {
                return Ok(Err(SkillError::Refused { server, skill: skill.uri, why }));
            }
            let read = read(&requester, &skill.uri).await?;
            let verified = skills::content_bytes(&read, &skill.uri).and_then(|bytes| skills::verify_skill_md(&skill, bytes));
            Ok(match verified {
                Ok(text) => Ok(LoadedSkill { server, skill, text }),
                Err(mismatch) => Err(unverified(server, &skill, &skill.uri, mismatch)),
            })
        })
    }
}

/// Reads one file of a loaded skill (`uri` absolute, or relative to the
/// skill's root) and verifies it against the held entry; an unlisted file
/// is refused without being read.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<Verified<Vec<u8>>, CallError>")]
pub struct ReadSkillFile {
    pub skill: Skill,
    pub uri: String,
}

impl Operation for ReadSkillFile {
    type Output = Verified<Vec<u8>>;
    const CAPABILITY: Option<&'static str> = Some("resources");
    const METHOD: &'static str = methods::RESOURCES_READ;
    fn run(self, requester: Requester) -> Flow<Verified<Vec<u8>>> {
        Box::pin(async move {
            let (skill, server) = (self.skill, requester.server().to_string());
            let uri = skill.resolve(&self.uri);
            if let Err(mismatch) = skills::verify_file(&skill, &uri, &[]).or_else(keep_unlisted) {
                return Ok(Err(unverified(server, &skill, &uri, mismatch)));
            }
            let read = read(&requester, &uri).await?;
            let bytes = skills::content_bytes(&read, &uri).and_then(|bytes| skills::verify_file(&skill, &uri, &bytes).map(|()| bytes));
            Ok(bytes.map_err(|mismatch| unverified(server, &skill, &uri, mismatch)))
        })
    }
}

/// Before a read only an unlisted file is an error (sizes and digests are
/// checked on what is read).
fn keep_unlisted(mismatch: Mismatch) -> Result<(), Mismatch> {
    match mismatch {
        Mismatch::Unlisted => Err(Mismatch::Unlisted),
        _ => Ok(()),
    }
}

async fn read(requester: &Requester, uri: &str) -> Result<ReadResourceResult, CallError> {
    let label = format!("{} {uri}", methods::RESOURCES_READ);
    requester.request(methods::RESOURCES_READ, json!({ "uri": uri }), label).await
}

fn unverified(server: String, skill: &Skill, file: &str, mismatch: Mismatch) -> SkillError {
    SkillError::Unverified { server, skill: skill.uri.clone(), file: file.to_string(), mismatch }
}
