//! Listing what a server offers: tools, resources and prompts, every page,
//! at connect and again on each `list_changed`.

use super::*;

impl Connection {
    /// Lists every page of `what`, then takes the items in. One listing of
    /// each kind at a time; a `list_changed` during one triggers one more
    /// afterwards. Listings use uncounted internal requests, so they are
    /// sent before the server is ready and never take a caller's slot.
    pub(super) fn list(&mut self, what: Listing, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        let state = &mut run.listings[what as usize];
        if state.running {
            state.again = true;
            return;
        }
        state.running = true;
        let generation = run.generation;
        self.list_page(generation, what, None, Vec::new(), ctx);
    }

    fn list_page(
        &mut self,
        generation: u64,
        what: Listing,
        cursor: Option<String>,
        mut items: Vec<serde_json::Value>,
        ctx: &mut Context<Self>,
    ) {
        let params = match &cursor {
            Some(cursor) => serde_json::json!({ "cursor": cursor }),
            None => serde_json::json!({}),
        };
        let answer = self.request(what.method(), &params, ctx);
        ctx.spawn(answer.into_actor(self).map(move |outcome, act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let server = act.config.name.clone();
            let page = flatten(outcome).and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::Internal));
            let page = page.and_then(|mut page| {
                let found = page.get_mut(what.field()).map(serde_json::Value::take);
                let found = found.and_then(|f| serde_json::from_value::<Vec<serde_json::Value>>(f).ok());
                let found = found.ok_or_else(|| Failure::Internal(format!("the answer has no `{}` list", what.field())))?;
                Ok((found, page.get("nextCursor").and_then(|c| c.as_str()).map(str::to_string)))
            });
            let (found, next) = match page {
                Ok(page) => page,
                Err(failure) => return act.on_listing_failed(what, failure.into_connect_error(&server, what.method()), ctx),
            };
            items.extend(found);
            match next {
                Some(next) if Some(&next) == cursor.as_ref() || items.len() > MAX_LIST_PAGES * 100 => {
                    let message = format!("pagination does not advance (cursor {next:?} repeats)");
                    act.on_listing_failed(what, ConnectError::Protocol { server, method: what.method().into(), message }, ctx);
                }
                Some(next) => act.list_page(generation, what, Some(next), items, ctx),
                None => act.on_listed(what, items, ctx),
            }
        }));
    }

    /// A tools listing that fails ends the run; resources and prompts are
    /// secondary: the server serves its tools and the count stays as it was.
    fn on_listing_failed(&mut self, what: Listing, error: ConnectError, ctx: &mut Context<Self>) {
        if what == Listing::Tools {
            return self.abort_run(error, Ending::Failure);
        }
        tracing::warn!(server = %self.config.name, "{error}");
        self.on_listed_count(what, None, ctx);
    }

    fn on_listed(&mut self, what: Listing, items: Vec<serde_json::Value>, ctx: &mut Context<Self>) {
        match what {
            Listing::Tools => {
                let server = self.config.name.clone();
                let tools = items.into_iter().filter_map(|tool| ListedTool::parse(&server, tool)).collect();
                self.on_tools_listed(tools);
                self.on_listed_count(what, None, ctx);
            }
            Listing::Resources | Listing::Prompts => self.on_listed_count(what, Some(items.len()), ctx),
        }
    }

    /// Records a finished listing; the first time every listing is done, the
    /// server is ready (`Connected`) and waiting calls go out.
    pub(super) fn on_listed_count(&mut self, what: Listing, count: Option<usize>, ctx: &mut Context<Self>) {
        match (what, count) {
            (Listing::Resources, Some(n)) => self.counts.resources = n,
            (Listing::Prompts, Some(n)) => self.counts.prompts = n,
            _ => {}
        }
        let Some(run) = self.run.as_mut() else { return };
        let state = &mut run.listings[what as usize];
        state.running = false;
        state.done = true;
        let again = std::mem::take(&mut state.again);
        let first = !run.ready && run.listings.iter().all(|l| l.done);
        if first {
            run.ready = true;
            if let Some(timer) = run.startup_timer.take() {
                ctx.cancel_future(timer);
            }
            self.last_error = None;
            self.set_state(ServerState::Connected);
            self.pump(ctx);
            let generation = self.generation;
            self.schedule_health_ping(generation, ctx);
        }
        if again {
            self.list(what, ctx);
        }
    }

    fn on_tools_listed(&mut self, mut listed: Vec<ListedTool>) {
        listed.retain(|listed| self.config.tools.permits(&listed.tool.name));
        self.contracts = listed
            .iter()
            .map(|listed| (listed.tool.name.to_string(), Arc::new(ToolContract::of(&listed.tool, listed.task_required))))
            .collect();
        let tools: Vec<Tool> = listed.into_iter().map(|listed| listed.tool).collect();
        tracing::info!(server = %self.config.name, tools = tools.len(), "tools listed");
        self.tools = tools.clone();
        if self.enabled && !self.stopping {
            self.registry.do_send(ToolsChanged { server: self.config.name.clone(), tools });
        }
    }
}

/// What a connection lists from its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Listing {
    Tools = 0,
    Resources = 1,
    Prompts = 2,
}

impl Listing {
    fn method(self) -> &'static str {
        match self {
            Listing::Tools => methods::TOOLS_LIST,
            Listing::Resources => methods::RESOURCES_LIST,
            Listing::Prompts => methods::PROMPTS_LIST,
        }
    }

    /// The result's list field, which is also the capability's name.
    fn field(self) -> &'static str {
        self.capability()
    }

    pub(super) fn capability(self) -> &'static str {
        match self {
            Listing::Tools => "tools",
            Listing::Resources => "resources",
            Listing::Prompts => "prompts",
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ListingState {
    pub(super) running: bool,
    /// A `list_changed` came during the listing: list again after it.
    pub(super) again: bool,
    /// Listed at least once in this run.
    pub(super) done: bool,
}

/// A listed tool, with what `rmcp::model::Tool` does not keep.
struct ListedTool {
    pub(super) tool: Tool,
    /// `execution.taskSupport = "required"` (2025-11-25 tasks).
    pub(super) task_required: bool,
}

impl ListedTool {
    /// A tool that is not valid is left out with a warning: one bad tool
    /// must not take its server's other tools down.
    fn parse(server: &str, value: serde_json::Value) -> Option<ListedTool> {
        let task_required = value.pointer("/execution/taskSupport").and_then(|t| t.as_str()) == Some("required");
        match serde_json::from_value::<Tool>(value) {
            Ok(tool) => Some(ListedTool { tool, task_required }),
            Err(error) => {
                tracing::warn!(server, "a tool in tools/list is not valid and is left out: {error}");
                None
            }
        }
    }
}

/// Resources and prompts a server offers, counted at connect for the status.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) resources: usize,
    pub(super) prompts: usize,
}
