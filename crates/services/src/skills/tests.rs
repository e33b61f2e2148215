use serde_json::json;

use super::frontmatter::{compare, split};
use super::*;

const SKILL_MD: &str =
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: 2\n---\n\nSkill body.\n";
const FORMS: &str = "Supporting content.\n";

fn entry(skill_md: &str) -> Skill {
    let file = |uri: &str, text: &str| json!({"uri": uri, "digest": sha256_digest(text.as_bytes()), "size": text.len()});
    Skill::from_value(json!({
        "uri": "skill://pdf-processing/SKILL.md",
        "frontmatter": {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents", "metadata": {"version": 2.0}},
        "resources": [file("skill://pdf-processing/SKILL.md", skill_md), file("skill://pdf-processing/references/FORMS.md", FORMS)],
    }))
    .unwrap()
}

#[test]
fn digests_are_sha256_in_lowercase_hex() {
    assert_eq!(sha256_digest(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

#[test]
fn a_verified_skill_md_is_accepted_and_its_body_follows_the_frontmatter() {
    let skill = entry(SKILL_MD);
    assert_eq!((skill.name(), skill.root()), ("pdf-processing", "skill://pdf-processing"));
    skill.check_manifest().unwrap();
    let text = verify_skill_md(&skill, SKILL_MD.as_bytes().to_vec()).unwrap();
    let loaded = LoadedSkill { server: "s".into(), skill: skill.clone(), text };
    assert_eq!(loaded.body(), "\nSkill body.\n");
    let forms = skill.resolve("references/FORMS.md");
    verify_file(&skill, &forms, FORMS.as_bytes()).unwrap();
}

#[test]
fn size_digest_frontmatter_and_unlisted_files_are_refused() {
    let skill = entry(SKILL_MD);
    let longer = format!("{SKILL_MD}extra bytes\n");
    assert!(matches!(verify_skill_md(&skill, longer.into_bytes()), Err(Mismatch::Size { .. })));
    let evil = SKILL_MD.replace("Skill body.", "Evil body!!");
    assert!(matches!(verify_skill_md(&skill, evil.into_bytes()), Err(Mismatch::Digest { .. })));
    // The manifest matches the served file, but the file's frontmatter is not the listed one.
    let changed = SKILL_MD.replace("description: Extract, fill, and assemble PDF documents", "description: Exfiltrate credentials");
    let consistent = entry(&changed);
    match verify_skill_md(&consistent, changed.into_bytes()) {
        Err(Mismatch::Frontmatter(why)) => assert!(why.contains("`description`"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(verify_file(&skill, "skill://pdf-processing/references/NEW.md", b"x"), Err(Mismatch::Unlisted));
    assert!(matches!(verify_skill_md(&entry("no frontmatter\n"), b"no frontmatter\n".to_vec()), Err(Mismatch::Frontmatter(_))));
}

#[test]
fn entries_that_break_the_rules_are_not_skills() {
    let base =
        json!({"uri": "skill://a/b/refunds/SKILL.md", "frontmatter": {"name": "refunds", "description": "d"}, "resources": "dynamic"});
    assert_eq!(Skill::from_value(base.clone()).unwrap().resources, SkillFiles::Dynamic(Dynamic));
    for (field, value) in [
        ("uri", json!("skill://a/b/refunds/README.md")),
        ("uri", json!("skill://a/b/other/SKILL.md")),
        ("frontmatter", json!({"name": "refunds"})),
        ("resources", json!("static")),
        ("resources", Value::Null),
    ] {
        let mut wrong = base.clone();
        wrong[field] = value;
        assert!(Skill::from_value(wrong.clone()).is_err(), "{wrong}");
    }
}

#[test]
fn manifests_are_checked_before_any_read() {
    let mut skill = entry(SKILL_MD);
    let SkillFiles::Listed(files) = &mut skill.resources else { unreachable!() };
    files[1].size = MAX_TOTAL_BYTES;
    assert!(skill.check_manifest().unwrap_err().contains("over the limit"));
    let mut outside = entry(SKILL_MD);
    let SkillFiles::Listed(files) = &mut outside.resources else { unreachable!() };
    files[1].uri = "skill://other/secret.md".into();
    assert!(outside.check_manifest().unwrap_err().contains("outside"));
    let mut many = entry(SKILL_MD);
    let SkillFiles::Listed(files) = &mut many.resources else { unreachable!() };
    let extra = files[1].clone();
    files.extend(std::iter::repeat_n(extra, MAX_FILES));
    assert!(many.check_manifest().unwrap_err().contains("512"));
}

#[test]
fn dynamic_skills_read_only_under_their_root() {
    let skill = Skill::from_value(
        json!({"uri": "skill://daily/SKILL.md", "frontmatter": {"name": "daily", "description": "d"}, "resources": "dynamic"}),
    )
    .unwrap();
    verify_file(&skill, "skill://daily/data/today.md", b"x").unwrap();
    assert_eq!(verify_file(&skill, "skill://dailyx/SKILL.md", b"x"), Err(Mismatch::Unlisted));
    assert_eq!(verify_file(&skill, "skill://daily/../other/SKILL.md", b"x"), Err(Mismatch::Unlisted));
}

#[test]
fn frontmatter_blocks_are_found_with_either_line_ending() {
    assert_eq!(split("---\r\nname: a\r\n---\r\nbody"), Some(("name: a\r\n", "body")));
    assert_eq!(split("---\nname: a\n...\n"), Some(("name: a\n", "")));
    assert_eq!(split("name: a\n---\n"), None);
    assert_eq!(split("---\nname: a\n"), None);
    assert!(compare("- a\n- b\n", &JsonObject::new()).unwrap_err().contains("mapping"));
    assert!(compare("a: [unclosed\n", &JsonObject::new()).is_err());
}
