//! `mcpvisor agent`: the Agent actor on the command line.
//!
//! With `-p PROMPT` it runs one prompt (`oneshot`): the final answer on
//! stdout, tool activity on stderr, or every event as a JSON line with
//! `--json`. Without it, an interactive chat on the terminal (`chat`).
//!
//! The model: `--provider`/`--model`/`--base-url` flags, then `[agent]` in
//! the configuration, then the SDKs' environment variables
//! ([`crate::llm::settings`]). When no model is named anywhere, the built-in
//! `scripted` model answers (a note on stderr says so), so the command
//! works on a fresh machine with no key.
//!
//! Tools: every configured server's, and the built-in ones (read, write
//! and list files, run a command, in the working directory) as the
//! server `builtin`, unless `[agent] builtin_tools = false`.
//!
//! Roots: the agent offers its workspace (the working directory, where the
//! built-in tools work) to the servers with no configured `roots`.
//!
//! Confirmation (`--confirm`, `[agent] confirm`, default `ask`): asked on
//! the terminal when stdin is one; otherwise a call that needs it is denied
//! and the model and stderr are told why.
//!
//! Exit codes: 0 the turn ended normally (`end_turn`, `max_tokens`); 1 it
//! ended otherwise (`max_turn_requests`, `refusal`, `cancelled`) or the
//! model failed mid-turn; 2 usage or configuration (a refused key, an
//! unknown model included); 3 the model could not be reached; 130 a
//! signal: with `-p`, Ctrl-C or SIGTERM cancels the turn, which ends
//! (with its `--json` result) before the command exits.

mod asking;
mod chat;
mod history;
mod oneshot;

use std::sync::Arc;

use clap::Args;

use super::output::{warn, Failure};
use super::servers::{env, Servers};
use super::session::{prepare, Session};
use super::{Cli, EXIT_CONNECTION, EXIT_TOOL_ERROR};
use crate::actors::agent::{AgentConfig, AgentError, AgentLimits, AgentStop, ConfirmPolicy, TurnEnded};
use crate::actors::client_requests::{ClientHandlers, Root};
use crate::builtin_tools::{self, BuiltinSettings};
use crate::config::{AgentSettings, ConfirmMode, Keyword};
use crate::llm::settings::{Choices, MODEL_VAR};
use crate::llm::{self, ChatModel, LlmError, ModelSettings, Provider};

#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Run this one prompt, print the answer and exit (else: an interactive chat).
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    pub prompt: Option<String>,
    #[command(flatten)]
    pub choice: ModelArgs,
    /// Go on with a saved conversation (its id is in the first --json event and in the chat's banner).
    #[arg(long, value_name = "ID", conflicts_with = "continue_last")]
    pub resume: Option<String>,
    /// Go on with the most recent saved conversation.
    #[arg(long = "continue")]
    pub continue_last: bool,
}

/// The model, its confirmation and its limits: the flags `agent` and `acp` share.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// The model's name (else [agent] model, else $MCPVISOR_MODEL).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// openai (Chat Completions, also Ollama, vLLM, llama.cpp, LM Studio, OpenRouter), anthropic, or scripted (built in, no key).
    #[arg(long, value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// The API's base URL (else [agent] base_url, else $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// When to ask before a tool call: always, never, ask (default: ask unless the tool is read-only).
    #[arg(long, value_name = "MODE")]
    pub confirm: Option<String>,
    /// Model round trips per prompt (default 50).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<usize>,
    /// Ask for whole answers instead of streamed ones.
    #[arg(long)]
    pub no_stream: bool,
}

/// What every agent of this command starts with; the chat changes the
/// model and the mode as the user asks.
pub struct Setup {
    args: ModelArgs,
    settings: AgentSettings,
    pub model: Arc<dyn ChatModel>,
    /// The model's API key, masked in saved conversations.
    key: Option<String>,
    /// The key's variable when the provider's own endpoint has no key.
    missing_key: Option<&'static str>,
    pub mode: ConfirmMode,
    limits: AgentLimits,
    system: String,
}

impl Setup {
    pub(in crate::cli) fn new(args: &ModelArgs, settings: &AgentSettings) -> Result<Setup, Failure> {
        let mode = match &args.confirm {
            Some(word) => ConfirmMode::parse(word)
                .ok_or_else(|| Failure::usage(format!("--confirm {word}: write one of {}", ConfirmMode::choices())))?,
            None => settings.confirm.unwrap_or_default(),
        };
        let limits = AgentLimits {
            max_turns: args.max_turns.or(settings.max_turns).unwrap_or(50).max(1),
            context_tokens: settings.context_tokens.unwrap_or(AgentLimits::default().context_tokens),
            ..AgentLimits::default()
        };
        let (model, key, missing_key) = model(args, settings)?;
        Ok(Setup {
            model,
            key,
            missing_key,
            args: args.clone(),
            settings: settings.clone(),
            mode,
            limits,
            system: settings.system_prompt.clone().unwrap_or_else(default_system_prompt),
        })
    }

    /// A new agent's configuration for the `opened` conversation (no events, no asker yet).
    pub fn config(&self, opened: history::Opened) -> AgentConfig {
        let mut config = AgentConfig::new(self.model.clone());
        let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
        config.policy = ConfirmPolicy::new(self.mode, self.settings.clone()).with_workspace(builtin_tools::SERVER_NAME, cwd);
        config.limits = self.limits;
        config.conversation.system = Some(opened.system.unwrap_or_else(|| self.system.clone()));
        config.conversation.messages = opened.messages;
        config.journal = opened.journal;
        config
    }

    /// What `mcpvisor acp` gives every editor session: the same model,
    /// confirmation, limits and system prompt, the built-in tools per
    /// session, and the conversation store.
    pub fn acp_options(&self) -> crate::acp::AcpOptions {
        let store = crate::sessions::SessionStore::default_location()
            .map_err(|error| warn(format_args!("sessions are not saved (session/load is off): {error}")))
            .ok();
        crate::acp::AcpOptions {
            model: self.model.clone(),
            policy: ConfirmPolicy::new(self.mode, self.settings.clone()),
            limits: self.limits,
            system_prompt: self.settings.system_prompt.clone(),
            builtin_tools: self.settings.builtin_tools != Some(false),
            command_env: self.settings.command_env.clone(),
            store,
            redactor: history::redactor(self),
            missing_key: self.missing_key,
            switch_model: Some(self.model_switch()),
        }
    }

    /// Connects to model `name` of the same provider, as `with_model` does, from any thread.
    fn model_switch(&self) -> crate::acp::ModelSwitch {
        let (args, settings) = (self.args.clone(), self.settings.clone());
        Arc::new(move |name: &str| {
            let args = ModelArgs { model: Some(name.to_string()), ..args.clone() };
            model(&args, &settings).map(|(model, ..)| model).map_err(|failure| failure.message)
        })
    }

    /// Switches to model `name` of the same provider.
    pub fn with_model(&mut self, name: &str) -> Result<(), Failure> {
        let args = ModelArgs { model: Some(name.to_string()), ..self.args.clone() };
        (self.model, self.key, self.missing_key) = model(&args, &self.settings)?;
        self.args = args;
        Ok(())
    }
}

pub fn run(cli: &Cli, args: &AgentArgs) -> Result<u8, Failure> {
    let servers = Servers::load(cli)?;
    let setup = Setup::new(&args.choice, &servers.agent)?;
    // Before the runtime: the exporters' threads are their own.
    let telemetry = super::otel::start(&servers, Default::default())?;
    // Not `with_runtime`: Ctrl-C cancels the turn instead of ending the command.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::connection(format!("cannot start a tokio runtime: {e}")))?;
    match &args.prompt {
        Some(prompt) => runtime.block_on(async {
            // Until the turn runs, a signal stops the command (and the servers) as with_runtime's does.
            let session = tokio::select! {
                session = start(&servers, telemetry.clone()) => session?,
                signal = super::interrupted() => return Err(super::stopped_by(signal)),
            };
            let outcome = match history::open(args, &setup) {
                Ok(opened) => oneshot::run(cli, &session, &setup, opened, prompt).await,
                Err(failure) => Err(failure),
            };
            session.close().await;
            super::otel::flush(&telemetry, super::otel::FLUSH_DEADLINE).await;
            outcome
        }),
        None => runtime.block_on(async {
            let session = start(&servers, telemetry.clone()).await?;
            let outcome = match history::open(args, &setup) {
                Ok(opened) => chat::run(&session, setup, opened).await,
                Err(failure) => Err(failure),
            };
            session.close().await;
            super::otel::flush(&telemetry, super::otel::FLUSH_DEADLINE).await;
            outcome
        }),
    }
}

/// Starts every configured server and the built-in tools, and waits
/// until each has settled; the listings go to the tool cache. `telemetry`
/// watches their calls (and takes the turns' spans, OpenTelemetry on).
async fn start(servers: &Servers, telemetry: crate::telemetry::Telemetry) -> Result<Session, Failure> {
    let entries = servers.to_start(None)?;
    let workspace = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let offered = vec![Root::of(&workspace.to_string_lossy())];
    let handlers = ClientHandlers::default().offered_roots_fn(move |_| std::future::ready(Ok(offered.clone())));
    let session = Session::launch_configs(prepare(entries.iter().copied(), |_| {})?, handlers, telemetry)?;
    session.settle().await;
    if servers.agent.builtin_tools != Some(false) {
        add_builtin(&session, servers, workspace, servers.agent.sandbox.clone()).await;
    }
    let statuses = session.handle.status().await;
    for status in &statuses {
        if !matches!(status.state, crate::ServerState::Connected | crate::ServerState::Disabled) {
            warn(format_args!("server `{}` is {}; its tools are not offered", status.name, super::session::describe(status)));
        }
    }
    if let Some(cache) = crate::catalog_cache::CatalogCache::default_location() {
        super::catalog::save(&cache, &entries, &statuses, &session.handle.list_kept_tools().await);
    }
    Ok(session)
}

/// The built-in tools (files and commands under the working directory) as the server `builtin`.
async fn add_builtin(session: &Session, servers: &Servers, workspace: std::path::PathBuf, sandbox: Option<crate::config::SandboxSpec>) {
    if servers.get(builtin_tools::SERVER_NAME).is_ok() {
        warn(format_args!(
            "a configured server is named `{}`: the built-in tools are left out (rename it to have both)",
            builtin_tools::SERVER_NAME
        ));
        return;
    }
    let settings = BuiltinSettings {
        command_env: builtin_tools::command_env(&servers.agent.command_env),
        command_sandbox: sandbox,
        ..BuiltinSettings::new(workspace)
    };
    let builtin = builtin_tools::server(settings);
    if let Err(error) = session.handle.add_in_process(builtin.config, builtin.handler).await {
        warn(format_args!("the built-in tools are not available: {error}"));
    }
    session.settle().await;
}

/// The model the flags, the configuration and the environment name, and its key.
/// The third value: the key's variable when the provider's own endpoint has no key.
type Chosen = (Arc<dyn ChatModel>, Option<String>, Option<&'static str>);

fn model(args: &ModelArgs, settings: &AgentSettings) -> Result<Chosen, Failure> {
    let provider = args.provider.clone().or_else(|| settings.provider.clone());
    let named = args.model.is_some() || settings.model.is_some() || env(MODEL_VAR).is_some_and(|m| !m.trim().is_empty());
    if provider.as_deref() == Some("scripted") || (provider.is_none() && !named) {
        if provider.is_none() {
            warn(format_args!(
                "no model named (--model, {MODEL_VAR} or [agent] model): the built-in scripted demo model answers; it calls a tool your prompt names"
            ));
        }
        return Ok((Arc::new(llm::scripted::Scripted), None, None));
    }
    let provider = match provider.as_deref() {
        None => None,
        Some(name) => {
            Some(Provider::parse(name).ok_or_else(|| Failure::usage(format!("--provider {name}: write openai, anthropic or scripted")))?)
        }
    };
    let choices = Choices {
        provider,
        model: args.model.clone().or_else(|| settings.model.clone()),
        base_url: args.base_url.clone().or_else(|| settings.base_url.clone()),
        api_key: None,
        stream: if args.no_stream { Some(false) } else { settings.stream },
    };
    let settings = ModelSettings::resolve(choices, env).map_err(|e| Failure::usage(e.to_string()))?;
    let model = llm::connect(&settings).map_err(|e| Failure::usage(e.to_string()))?;
    Ok((model, settings.api_key.clone(), settings.missing_key()))
}

/// The most characters of a tool call's arguments shown on a terminal.
const SHOWN_ARGUMENTS: usize = 300;

/// A tool call's arguments as shown on a terminal (chat, `-p` on stderr, a
/// confirmation question): compact JSON cut to [`SHOWN_ARGUMENTS`]
/// characters, with a marker saying how much was left out. A model may
/// write megabytes of arguments; the terminal gets a few hundred bytes.
pub fn shown_arguments(arguments: &serde_json::Value) -> String {
    let mut shown = arguments.to_string();
    if let Some((cut, _)) = shown.char_indices().nth(SHOWN_ARGUMENTS) {
        let left_out = shown.len() - cut;
        shown.truncate(cut);
        shown.push_str(&format!("… [{left_out} more bytes]"));
    }
    shown
}

fn default_system_prompt() -> String {
    crate::actors::agent::default_system_prompt(&std::env::current_dir().unwrap_or_default())
}

/// The exit code of a turn's outcome.
fn exit_code(outcome: &Result<TurnEnded, AgentError>) -> u8 {
    match outcome {
        Ok(ended) if matches!(ended.stop_reason, AgentStop::EndTurn | AgentStop::MaxTokens) => 0,
        Ok(_) => EXIT_TOOL_ERROR,
        Err(AgentError::Model(error)) if error.is_unreachable() => EXIT_CONNECTION,
        Err(AgentError::Model(LlmError::Settings { .. } | LlmError::Auth { .. } | LlmError::UnknownModel { .. })) => super::EXIT_USAGE,
        Err(_) => EXIT_TOOL_ERROR,
    }
}
