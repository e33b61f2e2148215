//! Listing what a server offers: tools, resources and prompts, every page
//! (through one bounded [`Paginator`]), at connect and again on each
//! `list_changed`.

use serde::de::IgnoredAny;

use super::intake::ToolIntake;
use super::*;
use crate::protocol::pagination::{ListBounds, Paginator};

/// What the pages of one listing have brought so far.
enum Gathered {
    /// Tools are judged (each alone) as each page comes.
    Tools(ToolIntake),
    /// Resources and prompts are only counted.
    Count(usize),
}

impl Connection {
    /// Lists every page of `what`, then takes the items in. One listing of
    /// each kind at a time; a `list_changed` during one triggers one more
    /// afterwards. Listings use uncounted internal requests, so they are
    /// sent before the server is ready and never take a caller's slot.
    pub(super) fn list(&mut self, what: Listing, ctx: &mut Context<Self>) {
        let bounds = self.list_bounds();
        let Some(run) = self.run.as_mut() else { return };
        let state = &mut run.listings[what as usize];
        if state.running {
            state.again = true;
            return;
        }
        state.running = true;
        let generation = run.generation;
        let gathered = match what {
            Listing::Tools => Gathered::Tools(ToolIntake::default()),
            Listing::Resources | Listing::Prompts => Gathered::Count(0),
        };
        self.list_page(generation, what, Paginator::new(what.method(), what.field(), bounds), gathered, ctx);
    }

    pub(super) fn list_bounds(&self) -> ListBounds {
        ListBounds { max_pages: self.config.limits.max_list_pages, max_items: self.config.limits.max_list_items }
    }

    fn list_page(&mut self, generation: u64, what: Listing, mut pages: Paginator, mut gathered: Gathered, ctx: &mut Context<Self>) {
        if let Some(run) = self.current_run(generation) {
            run.listings[what as usize].page = pages.page();
        }
        let answer = self.request(what.method(), &pages.params(), ctx);
        self.when_answered(generation, answer, "a list answer", ctx, move |act, outcome, ctx| {
            let server = act.config.name.clone();
            let page = outcome.and_then(|raw| {
                let taken = match &mut gathered {
                    Gathered::Tools(intake) => pages.take::<&RawValue>(&raw).map(|(found, more)| {
                        intake.take_page(found, &act.config.tools);
                        more
                    }),
                    Gathered::Count(count) => pages.take::<IgnoredAny>(&raw).map(|(found, more)| {
                        *count += found.len();
                        more
                    }),
                };
                taken.map_err(Failure::Malformed)
            });
            match page {
                Ok(true) => act.list_page(generation, what, pages, gathered, ctx),
                Ok(false) => act.on_listed(what, gathered, ctx),
                Err(Failure::Malformed(message)) => act.on_listing_failed(what, ConnectError::Listing { server, message }, ctx),
                Err(failure) => {
                    let step = format!("{} page {}", what.method(), pages.page());
                    act.on_listing_failed(what, failure.into_connect_error(&server, &step), ctx)
                }
            }
        });
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

    fn on_listed(&mut self, what: Listing, gathered: Gathered, ctx: &mut Context<Self>) {
        match gathered {
            Gathered::Tools(intake) => {
                self.on_tools_listed(intake);
                self.on_listed_count(what, None, ctx);
            }
            Gathered::Count(count) => self.on_listed_count(what, Some(count), ctx),
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
        let run_ready = run.ready;
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
        if !first && run_ready && self.state == ServerState::Pending && what == Listing::Tools {
            // Re-enabled: the tools are back in the catalog.
            self.set_state(ServerState::Connected);
        }
        if again {
            self.list(what, ctx);
        }
    }

    fn on_tools_listed(&mut self, intake: ToolIntake) {
        let ToolIntake { tools, contracts, warnings, .. } = intake;
        for warning in &warnings {
            tracing::warn!(server = %self.config.name, "{warning}");
        }
        tracing::info!(server = %self.config.name, tools = tools.len(), "tools listed");
        self.contracts = contracts;
        self.tool_warnings = warnings;
        let tools = self.admit_listed(tools);
        self.tool_count = tools.len();
        if self.enabled && self.phase != Phase::Stopping {
            self.registry.do_send_tools(self.config.name.clone(), tools);
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
    pub(super) fn method(self) -> &'static str {
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
    /// The page asked for last (from 1), for start-up errors.
    pub(super) page: usize,
}

/// Resources and prompts a server offers, counted at connect for the status.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) resources: usize,
    pub(super) prompts: usize,
}
