//! `prompts` (every server's prompts and their arguments) and `prompt`.

use super::arguments::prompt_arguments;
use super::output::{content_text, first_line, offered, table, with_server, Failure, Out, Paint, Piece};
use super::servers::Servers;
use super::session::start_selected;
use super::Cli;

#[derive(Debug, clap::Args)]
pub struct PromptsArgs {
    /// Only this server's prompts (only it is started).
    #[arg(long, value_name = "SERVER")]
    pub server: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    pub server: String,
    pub name: String,
    /// One argument of the prompt (a string); repeatable.
    #[arg(long = "arg", value_name = "KEY=VALUE")]
    pub args: Vec<String>,
}

pub async fn prompts(cli: &Cli, out: &Out, args: &PromptsArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let session = start_selected(&servers, args.server.as_deref(), "its prompts are not listed").await?;
    let mut prompts = Vec::new();
    let mut problem = None;
    for server in session.connected().await {
        match offered(session.handle.list_prompts(&server).await) {
            Ok(listed) => prompts.extend(listed.into_iter().map(|p| (server.clone(), p))),
            Err(e) => problem = Some(e),
        }
    }
    session.close().await;
    if let Some(failure) = problem {
        return Err(failure);
    }
    out.answer_json(&prompts.iter().map(|(s, p)| with_server(s, p)).collect::<Vec<_>>());
    let mut rows = vec![["SERVER", "PROMPT", "ARGUMENTS", "DESCRIPTION"].map(String::from).to_vec()];
    for (server, prompt) in &prompts {
        let arguments: Vec<String> = prompt
            .arguments
            .iter()
            .flatten()
            .map(|a| if a.required == Some(true) { a.name.clone() } else { format!("[{}]", a.name) })
            .collect();
        rows.push(vec![server.clone(), prompt.name.clone(), arguments.join(" "), first_line(prompt.description.as_deref())]);
    }
    for line in table(&rows) {
        out.answer(line);
    }
    if prompts.is_empty() {
        out.pieces([Piece(Paint::Dim, "(no prompts)".into())]);
    }
    Ok(0)
}

pub async fn prompt(cli: &Cli, out: &Out, args: &PromptArgs) -> Result<u8, Failure> {
    let arguments = prompt_arguments(&args.args)?;
    let servers = Servers::load(cli)?;
    let session = start_selected(&servers, Some(&args.server), "").await?;
    let arguments = (!arguments.is_empty()).then_some(arguments);
    let result = session.handle.get_prompt(&args.server, &args.name, arguments).await;
    session.close().await;
    let result = result?;
    out.answer_json(&result);
    if let Some(description) = &result.description {
        out.answer(description);
    }
    for message in &result.messages {
        let role = serde_json::to_value(&message.role).ok().and_then(|r| r.as_str().map(String::from)).unwrap_or_default();
        out.answer(format!("{role}: {}", content_text(&message.content)));
    }
    Ok(0)
}
