//! The tool schema checker (`protocol::schema::check`): an arbitrary schema
//! (biased towards JSON Schema keywords, with `$ref`s to itself and to
//! `$defs`) against an arbitrary value.
//!
//! Properties: never panics and always ends (the fuzzer's time-out catches
//! a check that explodes); an empty schema accepts everything and
//! `{"not": {}}` refuses everything.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::protocol::schema::check;
use serde_json::{json, Map, Value};

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let schema = mcpvisor_fuzz::object(u, 5)?;
    let value = mcpvisor_fuzz::json(u, 5)?;
    let _ = check(&schema, &value, "argument");
    assert_eq!(check(&Map::new(), &value, "argument"), Ok(()));
    let refuse_all = json!({"not": {}});
    assert!(check(refuse_all.as_object().unwrap_or(&Map::new()), &value, "argument").is_err());
    let _ = check(&schema, &Value::Object(schema.clone()), "field");
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
