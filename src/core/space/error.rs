//! The one error type of the space tree: why a change, a snapshot or a
//! tree construction was refused. Owns nothing else.

use super::params::ParamError;
use super::tree::NodeIx;
use crate::core::ids::CellId;

/// Why a change or a snapshot was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SpaceError {
    /// The change was computed against another tree version.
    #[error("change for version {change} applied to tree version {tree}")]
    VersionMismatch {
        /// The tree's version.
        tree: u64,
        /// The change's version.
        change: u64,
    },
    /// No leaf has this id.
    #[error("unknown cell {0}")]
    UnknownCell(CellId),
    /// The node is not an internal node of the tree.
    #[error("node {0:?} is not an internal node")]
    NotSplitNode(NodeIx),
    /// A split names a cell id already used in this space.
    #[error("cell id {0} already used (next free id is larger)")]
    CellIdUsed(CellId),
    /// The change would make this cell smaller than the size rule allows.
    #[error("cell {0} would break the size rule")]
    SizeRule(CellId),
    /// The cell is merging: it can no longer split or start a merge.
    #[error("cell {0} is merging")]
    CellMerging(CellId),
    /// Finishing a merge of a cell that is not merging.
    #[error("cell {0} is not merging")]
    NotMerging(CellId),
    /// The master cell is never merged.
    #[error("cell {0} is the master cell and cannot merge")]
    MasterCell(CellId),
    /// The cell is the root (the only cell): nothing to merge into.
    #[error("cell {0} has no sibling")]
    NoSibling(CellId),
    /// The cell's sibling is already merging.
    #[error("the sibling of cell {0} is merging")]
    SiblingMerging(CellId),
    /// The change would move the rect of this merging cell.
    #[error("change would move merging cell {0}")]
    TouchesMergingCell(CellId),
    /// A position is NaN or infinite.
    #[error("non-finite position")]
    NonFinite,
    /// A rebalance to the split's current position.
    #[error("rebalance does not move the split")]
    NoMove,
    /// Bad geometry params.
    #[error("bad space params: {0}")]
    Params(#[from] ParamError),
    /// Bytes that are not an archived tree or change.
    #[error("undecodable bytes: {0}")]
    Decode(String),
    /// A decoded tree breaks an invariant.
    #[error("corrupt tree: {0}")]
    Corrupt(&'static str),
}
