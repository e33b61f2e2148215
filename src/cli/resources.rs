//! `resources` (every server's resources and templates) and `read`.

use super::output::{first_line, offered, resource_text, table, with_server, Failure, Out, Paint, Piece};
use super::servers::Servers;
use super::session::start_selected;
use super::Cli;

#[derive(Debug, clap::Args)]
pub struct ResourcesArgs {
    /// Only this server's resources (only it is started).
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ReadArgs {
    pub server: String,
    pub uri: String,
}

pub async fn resources(cli: &Cli, out: &Out, args: &ResourcesArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let session = start_selected(&servers, args.server.as_deref(), "its resources are not listed").await?;
    let mut resources = Vec::new();
    let mut templates = Vec::new();
    let mut problem = None;
    for server in session.connected().await {
        match (offered(session.handle.list_resources(&server).await), offered(session.handle.list_resource_templates(&server).await)) {
            (Ok(r), Ok(t)) => {
                resources.extend(r.into_iter().map(|r| (server.clone(), r)));
                templates.extend(t.into_iter().map(|t| (server.clone(), t)));
            }
            (Err(e), _) | (_, Err(e)) => problem = Some(e),
        }
    }
    session.close().await;
    if let Some(failure) = problem {
        return Err(failure);
    }
    out.answer_json(&serde_json::json!({
        "resources": resources.iter().map(|(s, r)| with_server(s, r)).collect::<Vec<_>>(),
        "templates": templates.iter().map(|(s, t)| with_server(s, t)).collect::<Vec<_>>(),
    }));
    let mut rows = vec![["SERVER", "URI", "NAME", "MIME TYPE", "DESCRIPTION"].map(String::from).to_vec()];
    for (server, r) in &resources {
        rows.push(vec![
            server.clone(),
            r.uri.clone(),
            r.name.clone(),
            r.mime_type.clone().unwrap_or_default(),
            first_line(r.description.as_deref()),
        ]);
    }
    for (server, t) in &templates {
        rows.push(vec![
            server.clone(),
            t.uri_template.clone(),
            t.name.clone(),
            t.mime_type.clone().unwrap_or_default(),
            first_line(t.description.as_deref()),
        ]);
    }
    for line in table(&rows) {
        out.answer(line);
    }
    if rows.len() == 1 {
        out.pieces([Piece(Paint::Dim, "(no resources)".into())]);
    }
    Ok(0)
}

pub async fn read(cli: &Cli, out: &Out, args: &ReadArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let session = start_selected(&servers, Some(&args.server), "").await?;
    let result = session.handle.read_resource(&args.server, &args.uri).await;
    session.close().await;
    let result = result?;
    out.answer_json(&result);
    for contents in &result.contents {
        out.answer(resource_text(contents));
    }
    Ok(0)
}
