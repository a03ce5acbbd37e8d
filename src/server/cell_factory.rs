//! The one place that builds a cell from the config: the host's start-up
//! cells, the cells a split creates and instance cells all get the same
//! protocol knobs (`[world]`, `[cell]`, `[sync]`) and view knobs (`[aoi]`,
//! `[view]`).
//!
//! Owns [`CellFactory`]; holds no cell. Before it, a split built its cell
//! with the default view parameters, so `aoi.radius_m` and `[view]` were
//! ignored in every cell a split created.

use std::sync::Arc;

use crate::config::Config;
use crate::core::cell::{Cell, CellParams, CellParamsError, ViewParams};
use crate::core::entity::TypeRegistry;
use crate::core::ids::CellId;

/// Builds cells with the config's parameters.
#[derive(Clone, Debug)]
pub struct CellFactory {
    cell: CellParams,
    views: ViewParams,
    types: Arc<TypeRegistry>,
}

impl CellFactory {
    /// The factory of `config`'s cells, with entity types `types`.
    pub fn new(config: &Config, types: Arc<TypeRegistry>) -> Self {
        CellFactory {
            cell: config.cell_params(),
            views: config.view_params(),
            types,
        }
    }

    /// A new empty cell `id`.
    ///
    /// # Errors
    /// [`CellParamsError`] if the parameters do not validate (the config
    /// layer checked them: a bug).
    pub fn build(&self, id: CellId) -> Result<Cell, CellParamsError> {
        Cell::with_views(
            id,
            self.cell.clone(),
            self.views.clone(),
            self.types.clone(),
        )
    }

    /// The view parameters every cell gets.
    pub fn views(&self) -> &ViewParams {
        &self.views
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_gets_the_configs_view_knobs() {
        let config = Config::load(
            None,
            &[
                "aoi.radius_m=30.0".to_owned(),
                "aoi.leave_radius_m=33.0".to_owned(),
                "view.client_bytes_per_s_max=1234".to_owned(),
            ],
        )
        .expect("config");
        let f = CellFactory::new(&config, Arc::new(TypeRegistry::with_builtins()));
        let cell = f.build(CellId(7)).expect("cell");
        assert_eq!(cell.view_params().radius_m, 30.0);
        assert_eq!(cell.view_params().leave_radius_m, 33.0);
        assert_eq!(cell.view_params().observer.budget.bytes_per_s, 1234);
    }
}
