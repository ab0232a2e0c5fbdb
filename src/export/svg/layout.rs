//! The picture's layout: a row per thought and per family node with a row of its own (in
//! event order), the main line in the first column, each branch and family lane in a
//! column beside it (reused once its rows ended), notes beside in columns right of every
//! line; and the paths of edges (down a column, back up for a revision, detouring around
//! nodes in their way).
//!
//! Owns: [`Layout`] and [`layout`], the geometry constants, the edge paths. Must not:
//! write SVG text or look at a text's content (only seqs, branches, lanes and places).

use crate::export::picture::{At, Picture, Place};
use crate::projection::tree::ThoughtTree;
use std::collections::HashMap;

/// Width and height of a node box: a heading line and three lines of text
/// (`super::TEXT_LINES`, 15 px apart).
pub(crate) const NODE_W: u32 = 240;
pub(crate) const NODE_H: u32 = 76;
/// A node box's corner radius (`rx`), in px.
pub(crate) const NODE_RADIUS: u32 = 6;
/// Distance between the left edges of two columns.
pub(super) const COL_W: u32 = 290;
/// Distance between the tops of two rows: a 20 px gap between two boxes.
pub(super) const ROW_H: u32 = 96;
/// Room left of the first column for revision arcs.
pub(super) const GUTTER: u32 = 70;
/// Room above the first row for the title and the column headings.
pub(super) const TOP: u32 = 76;
pub(super) const MARGIN: u32 = 16;

/// What heads a column from a row on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Heading {
    /// The tree's branch at this index.
    Branch(usize),
    /// A family's lane.
    Lane(&'static str),
}

/// A branch or a family's lane: where its column is and from which row.
#[derive(Debug)]
pub(super) struct LaneAt {
    pub(super) heading: Heading,
    /// Seq shown with the heading (the first event in the lane).
    pub(super) seq: u64,
    pub(super) column: usize,
    pub(super) first_row: usize,
}

/// Rows handed out in order, and the first and last row and first seq of each lane.
pub(super) struct Rows {
    pub(super) next: usize,
    pub(super) span: Vec<(usize, usize, u64)>,
}

impl Rows {
    /// The next row, for an item of event `seq` on `lane` (if any).
    pub(super) fn take(&mut self, lane: Option<usize>, seq: u64) -> usize {
        let row = self.next;
        if let Some(lane) = lane {
            let span = &mut self.span[lane];
            if span.0 == usize::MAX {
                *span = (row, row, seq);
            }
            span.1 = row;
        }
        self.next += 1;
        row
    }
}

/// Where each node stands: its column and its row.
pub(super) struct Layout {
    pub(super) columns: usize,
    pub(super) rows: usize,
    /// Column of each thought, by seq.
    pub(super) column: HashMap<u64, usize>,
    /// Row of each thought, by seq.
    pub(super) row: HashMap<u64, usize>,
    /// (column, row) of each of the families' nodes, by index.
    pub(super) extra: Vec<(usize, usize)>,
    /// The branches and lanes in order of their first rows.
    pub(super) lanes: Vec<LaneAt>,
}

impl Layout {
    pub(super) fn place(&self, picture: &Picture, at: At) -> Option<(usize, usize)> {
        match at {
            At::Thought(seq) => Some((*self.column.get(&seq)?, *self.row.get(&seq)?)),
            At::Node(id) => self
                .extra
                .get(id.0)
                .copied()
                .filter(|_| id.0 < picture.nodes.len()),
        }
    }
}

/// One row per thought and per family node that takes a row of its own, in event order;
/// column 0 for the main line; each branch and family lane, in order of its first row,
/// in the leftmost other column that is free from its first row to its last (a column
/// is reused once what was in it has ended, so a long session with many short branches
/// stays a few columns wide); nodes beside another in that node's row, in the columns
/// right of every line.
pub(super) fn layout(tree: &ThoughtTree, picture: &Picture) -> Layout {
    let branch_at: HashMap<&str, usize> = tree
        .branches
        .iter()
        .enumerate()
        .map(|(index, branch)| (branch.id.as_str(), index))
        .collect();
    let thought_seqs: Vec<u64> = if picture.nodes.is_empty() {
        Vec::new()
    } else {
        tree.thoughts().map(|node| node.seq).collect()
    };
    // Where each family node really goes: beside a thought that does not exist, on a
    // branch that does not exist, falls back to a row of its own on the main line.
    let places: Vec<Place> = picture
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| match &node.place {
            Place::Beside(At::Thought(seq)) if thought_seqs.binary_search(seq).is_err() => {
                Place::Main
            }
            Place::Beside(At::Node(id)) if id.0 >= index => Place::Main,
            Place::Branch(id) if !branch_at.contains_key(id.as_str()) => Place::Main,
            place => place.clone(),
        })
        .collect();
    // Nodes with rows of their own, in event order (stable: a family's order within one
    // event stays).
    let mut own_rows: Vec<usize> = (0..places.len())
        .filter(|&i| !matches!(places[i], Place::Beside(_)))
        .collect();
    own_rows.sort_by_key(|&i| picture.nodes[i].seq);

    let mut column = HashMap::with_capacity(tree.order.len());
    let mut row = HashMap::with_capacity(tree.order.len());
    let mut extra = vec![(0, usize::MAX); places.len()];
    // Lanes: the branches (by index), then the families' lanes (by name, in order seen).
    let mut lane_names: Vec<&'static str> = Vec::new();
    let mut rows = Rows {
        next: 0,
        span: vec![(usize::MAX, 0, 0); tree.branches.len()],
    };
    let mut thought_lane: Vec<Option<usize>> = Vec::with_capacity(tree.order.len());
    let mut node_lane: Vec<Option<usize>> = vec![None; places.len()];
    let mut next_own = own_rows.iter().copied().peekable();
    let mut place_own = |index: usize, rows: &mut Rows| {
        let lane = match &places[index] {
            Place::Branch(id) => branch_at.get(id.as_str()).copied(),
            Place::Lane(name) => Some(match lane_names.iter().position(|n| n == name) {
                Some(at) => tree.branches.len() + at,
                None => {
                    lane_names.push(name);
                    rows.span.push((usize::MAX, 0, 0));
                    rows.span.len() - 1
                }
            }),
            _ => None,
        };
        node_lane[index] = lane;
        extra[index].1 = rows.take(lane, picture.nodes[index].seq);
    };
    for node in tree.thoughts() {
        while let Some(index) = next_own.next_if(|&i| picture.nodes[i].seq < node.seq) {
            place_own(index, &mut rows);
        }
        let lane = node
            .branch_id
            .as_deref()
            .and_then(|id| branch_at.get(id))
            .copied();
        thought_lane.push(lane);
        row.insert(node.seq, rows.take(lane, node.seq));
    }
    for index in next_own {
        place_own(index, &mut rows);
    }
    let Rows { next: rows, span } = rows;

    // Columns: lanes in order of their first rows.
    let mut by_first: Vec<usize> = (0..span.len())
        .filter(|&lane| span[lane].0 != usize::MAX)
        .collect();
    by_first.sort_by_key(|&lane| span[lane].0);
    let mut taken_until: Vec<usize> = Vec::new();
    let mut lane_column = vec![0; span.len()];
    let mut lanes = Vec::with_capacity(by_first.len());
    for lane in by_first {
        let (first, last, seq) = span[lane];
        let free = taken_until.iter().position(|&until| until < first);
        let at = free.unwrap_or_else(|| {
            taken_until.push(0);
            taken_until.len() - 1
        });
        taken_until[at] = last;
        lane_column[lane] = at + 1;
        lanes.push(LaneAt {
            heading: if lane < tree.branches.len() {
                Heading::Branch(lane)
            } else {
                Heading::Lane(lane_names[lane - tree.branches.len()])
            },
            seq,
            column: at + 1,
            first_row: first,
        });
    }
    for (node, lane) in tree.thoughts().zip(&thought_lane) {
        column.insert(node.seq, lane.map_or(0, |lane| lane_column[lane]));
    }
    for (index, lane) in node_lane.iter().enumerate() {
        extra[index].0 = lane.map_or(0, |lane| lane_column[lane]);
    }
    // Nodes beside another: its row, the next free column right of every line.
    let line_columns = 1 + taken_until.len();
    let mut side_taken: HashMap<usize, usize> = HashMap::new();
    let mut columns = line_columns;
    for (index, place) in places.iter().enumerate() {
        let Place::Beside(at) = place else { continue };
        let at_row = match at {
            At::Thought(seq) => row[seq],
            At::Node(id) => extra[id.0].1,
        };
        let slot = side_taken.entry(at_row).or_insert(0);
        extra[index] = (line_columns + *slot, at_row);
        *slot += 1;
        columns = columns.max(line_columns + *slot);
    }
    Layout {
        columns,
        rows,
        column,
        row,
        extra,
        lanes,
    }
}

pub(super) fn node_x(column: usize) -> u32 {
    MARGIN + GUTTER + column as u32 * COL_W
}

pub(super) fn node_y(row: usize) -> u32 {
    TOP + row as u32 * ROW_H
}

/// Rows taken in each column, sorted (only where the families drew something: then a
/// straight edge may pass over a node).
pub(super) fn occupancy(layout: &Layout) -> Vec<Vec<usize>> {
    let mut taken = vec![Vec::new(); layout.columns];
    for (&seq, &column) in &layout.column {
        taken[column].push(layout.row[&seq]);
    }
    for &(column, row) in &layout.extra {
        taken[column].push(row);
    }
    for rows in &mut taken {
        rows.sort_unstable();
    }
    taken
}

/// Whether a straight edge between two places would pass over another node: down one
/// column, a node in a row between theirs; along one row, a node in a column between.
pub(super) fn blocked(
    taken: &[Vec<usize>],
    (from_col, from_row): (usize, usize),
    (to_col, to_row): (usize, usize),
) -> bool {
    if taken.is_empty() {
        return false;
    }
    if from_col == to_col {
        // Going back up, an edge already arcs left of the column.
        let rows = &taken[from_col];
        let after = rows.partition_point(|&r| r <= from_row);
        to_row > from_row && rows.get(after).is_some_and(|&r| r < to_row)
    } else {
        let (low, high) = (from_col.min(to_col), from_col.max(to_col));
        from_row == to_row
            && taken[low + 1..high]
                .iter()
                .any(|rows| rows.binary_search(&from_row).is_ok())
    }
}

/// An edge around what lies between its ends: in one column, a curve through the gap
/// right of the column; in one row, an arc through the gap above the row.
pub(super) fn detour_path(
    from_col: usize,
    from_row: usize,
    to_col: usize,
    to_row: usize,
) -> String {
    if from_col == to_col {
        let x = node_x(from_col) + NODE_W;
        let bx = x + (COL_W - NODE_W) / 2;
        let (y1, y2) = (node_y(from_row) + NODE_H / 2, node_y(to_row) + NODE_H / 2);
        format!("M{x} {y1}C{bx} {y1} {bx} {y2} {x} {y2}")
    } else {
        let (x1, x2) = (node_x(from_col) + NODE_W / 2, node_x(to_col) + NODE_W / 2);
        let y = node_y(from_row);
        let by = y - (ROW_H - NODE_H) + 4;
        format!("M{x1} {y}C{x1} {by} {x2} {by} {x2} {y}")
    }
}

/// An edge from an earlier row down to a later one: straight within a column, else a
/// curve between the facing sides of the two nodes that runs down the gap between
/// columns (never down a column, whose other nodes it would cross).
pub(super) fn down_path(from_col: usize, from_row: usize, to_col: usize, to_row: usize) -> String {
    let (x1, y1) = (node_x(from_col), node_y(from_row));
    let (x2, y2) = (node_x(to_col), node_y(to_row));
    if from_col == to_col {
        let x = x1 + NODE_W / 2;
        format!("M{x} {}L{x} {}", y1 + NODE_H, y2)
    } else {
        let (sy, ey) = (y1 + NODE_H / 2, y2 + NODE_H / 2);
        let (sx, ex, gap) = if to_col > from_col {
            (x1 + NODE_W, x2, x1 + NODE_W + (COL_W - NODE_W) / 2)
        } else {
            (x1, x2 + NODE_W, x1 - (COL_W - NODE_W) / 2)
        };
        format!("M{sx} {sy}C{gap} {sy} {gap} {ey} {ex} {ey}")
    }
}

/// An edge from a later row back up to an earlier one (a revision to what it revises):
/// an arc left of the column when both are in one column, else a curve between their
/// facing sides.
pub(super) fn back_path(from_col: usize, from_row: usize, to_col: usize, to_row: usize) -> String {
    let (x1, y1) = (node_x(from_col), node_y(from_row) + NODE_H / 2);
    let (x2, y2) = (node_x(to_col), node_y(to_row) + NODE_H / 2);
    if from_col == to_col {
        // Farther rows bulge farther, so arcs of one column do not lie on each other.
        let span = from_row.abs_diff(to_row) as u32;
        let bulge = (18 + span.min(50)).min(GUTTER - 4);
        let bx = x1.saturating_sub(bulge);
        format!("M{x1} {y1}C{bx} {y1} {bx} {y2} {x2} {y2}")
    } else if from_col > to_col {
        let ex = x2 + NODE_W;
        format!("M{x1} {y1}C{ex} {y1} {ex} {y2} {ex} {y2}")
    } else {
        let sx = x1 + NODE_W;
        format!("M{sx} {y1}C{x2} {y1} {x2} {y2} {x2} {y2}")
    }
}
