//! Water-filling of one node's capacity among its backlogged children, in proportion
//! to their weights, each up to its limit (policy.md's sharing within one priority
//! level): child i gets min(c_i, λ·w_i), λ chosen so that the rates add up to the
//! capacity, or every child its limit when the limits add up to less.
//!
//! The children at their limit (*bound*, c_i <= λ·w_i) and the limited ones below it
//! (*free*) are kept in two indexed binary heaps by c_i / w_i, the bound ones largest
//! first, the free ones smallest first, with the sums λ needs. After a change only
//! the children whose side changed move, O(log n) each: λ rises with every move
//! (moving a child whose side was wrong frees capacity for the others), so no child
//! moves twice in one direction and the loop ends. Ratios are compared as exact
//! integer cross products, never as floats, so ties cannot make it cycle.
//!
//! Invariants (asserted in debug builds after every change): each backlogged child
//! is on exactly one side (bound, free or unlimited), the bound children's limits
//! are part of the limited children's, and after sorting the bound children take
//! no more than the capacity they were sorted for.

/// What a backlogged child asks of its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Demand {
    pub(crate) weight: u64,
    /// bit/s; `None`: no limit.
    pub(crate) limit: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Idle,
    Unlimited,
    Bound,
    Free,
}

const ABSENT: u32 = u32::MAX;

/// An indexed binary heap of children ordered by limit / weight (smallest first, or
/// largest first when `max`), so that any child can be removed.
#[derive(Clone, Debug)]
struct Heap {
    items: Vec<u32>,
    /// Per child: its index in `items`, or [`ABSENT`].
    at: Vec<u32>,
    max: bool,
}

/// Whether child `a` goes before child `b`: limit_a / weight_a < limit_b / weight_b
/// (or `>` for a max-heap), as exact cross products.
fn before(limit: &[u64], weight: &[u64], max: bool, a: u32, b: u32) -> bool {
    let (a, b) = (a as usize, b as usize);
    let left = u128::from(limit[a]) * u128::from(weight[b]);
    let right = u128::from(limit[b]) * u128::from(weight[a]);
    if max { left > right } else { left < right }
}

impl Heap {
    fn new(children: usize, max: bool) -> Self {
        Heap {
            items: Vec::with_capacity(children),
            at: vec![ABSENT; children],
            max,
        }
    }

    fn peek(&self) -> Option<u32> {
        self.items.first().copied()
    }

    fn push(&mut self, limit: &[u64], weight: &[u64], child: u32) {
        self.items.push(child);
        let i = self.items.len() - 1;
        self.at[child as usize] = i as u32;
        self.sift_up(limit, weight, i);
    }

    fn remove(&mut self, limit: &[u64], weight: &[u64], child: u32) {
        let i = self.at[child as usize] as usize;
        self.at[child as usize] = ABSENT;
        let last = self.items.pop().expect("the child is in the heap");
        if i < self.items.len() {
            self.items[i] = last;
            self.at[last as usize] = i as u32;
            self.sift_down(limit, weight, i);
            self.sift_up(limit, weight, i);
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.items.swap(i, j);
        self.at[self.items[i] as usize] = i as u32;
        self.at[self.items[j] as usize] = j as u32;
    }

    fn sift_up(&mut self, limit: &[u64], weight: &[u64], mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !before(limit, weight, self.max, self.items[i], self.items[parent]) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, limit: &[u64], weight: &[u64], mut i: usize) {
        loop {
            let mut first = i;
            for child in [2 * i + 1, 2 * i + 2] {
                if child < self.items.len()
                    && before(
                        limit,
                        weight,
                        self.max,
                        self.items[child],
                        self.items[first],
                    )
                {
                    first = child;
                }
            }
            if first == i {
                break;
            }
            self.swap(i, first);
            i = first;
        }
    }
}

/// One node's water-filling over a fixed set of children (indices 0..n), each
/// backlogged or not; preallocated, so no change allocates.
#[derive(Clone, Debug)]
pub(crate) struct Fill {
    weight: Vec<u64>,
    limit: Vec<u64>,
    side: Vec<Side>,
    bound: Heap,
    free: Heap,
    /// Σ c_i of the bound children.
    bound_bps: u64,
    /// Σ w_i of the free and the unlimited children: λ's denominator.
    free_weight: u64,
    /// Σ c_i of every limited backlogged child, bound or free.
    limited_bps: u64,
    unlimited: u32,
    active: u32,
    /// The capacity the sides are sorted for.
    capacity_bps: u64,
}

impl Fill {
    /// A fill of `children`, sorted first for `capacity_bps` (any capacity may be
    /// asked later).
    pub(crate) fn new(children: usize, capacity_bps: u64) -> Self {
        Fill {
            weight: vec![1; children],
            limit: vec![0; children],
            side: vec![Side::Idle; children],
            bound: Heap::new(children, true),
            free: Heap::new(children, false),
            bound_bps: 0,
            free_weight: 0,
            limited_bps: 0,
            unlimited: 0,
            active: 0,
            capacity_bps,
        }
    }

    /// Sets what `child` asks, `None` when it is not backlogged.
    pub(crate) fn set(&mut self, child: usize, demand: Option<Demand>) {
        match self.side[child] {
            Side::Idle => {}
            Side::Unlimited => {
                self.unlimited -= 1;
                self.free_weight -= self.weight[child];
            }
            Side::Bound => {
                self.bound.remove(&self.limit, &self.weight, child as u32);
                self.bound_bps -= self.limit[child];
                self.limited_bps -= self.limit[child];
            }
            Side::Free => {
                self.free.remove(&self.limit, &self.weight, child as u32);
                self.free_weight -= self.weight[child];
                self.limited_bps -= self.limit[child];
            }
        }
        if self.side[child] != Side::Idle {
            self.active -= 1;
        }
        self.side[child] = Side::Idle;
        if let Some(demand) = demand {
            self.active += 1;
            self.weight[child] = demand.weight.max(1);
            self.free_weight += self.weight[child];
            match demand.limit {
                None => {
                    self.side[child] = Side::Unlimited;
                    self.unlimited += 1;
                }
                Some(limit) => {
                    self.side[child] = Side::Free;
                    self.limit[child] = limit;
                    self.limited_bps += limit;
                    self.free.push(&self.limit, &self.weight, child as u32);
                }
            }
        }
        let capacity = self.capacity_bps;
        self.sort(capacity);
        debug_assert_eq!(
            self.active as usize,
            self.unlimited as usize + self.bound.items.len() + self.free.items.len(),
            "each backlogged child is on one side"
        );
        debug_assert!(self.bound_bps <= self.limited_bps);
    }

    /// What the node asks of its own parent: `None` when no child is backlogged, an
    /// unlimited demand when one of them is, else the sum of the limits.
    pub(crate) fn demand(&self) -> Option<Option<u64>> {
        if self.active == 0 {
            None
        } else if self.unlimited > 0 {
            Some(None)
        } else {
            Some(Some(self.limited_bps))
        }
    }

    /// The rate of backlogged `child` when the node has `capacity_bps` to share.
    pub(crate) fn rate(&mut self, child: usize, capacity_bps: u64) -> f64 {
        if capacity_bps != self.capacity_bps {
            self.sort(capacity_bps);
        }
        match self.side[child] {
            Side::Idle => 0.0,
            Side::Bound => self.limit[child] as f64,
            Side::Free | Side::Unlimited => {
                let left = capacity_bps.saturating_sub(self.bound_bps) as f64;
                left * self.weight[child] as f64 / self.free_weight as f64
            }
        }
    }

    /// λ for `capacity_bps`: the rate per unit of weight of the children below
    /// their limits; with every child at its limit, the largest limit per weight
    /// among them (the λ at which they would all just reach it).
    pub(crate) fn level(&mut self, capacity_bps: u64) -> f64 {
        if capacity_bps != self.capacity_bps {
            self.sort(capacity_bps);
        }
        let level = if self.free_weight > 0 {
            capacity_bps.saturating_sub(self.bound_bps) as f64 / self.free_weight as f64
        } else {
            self.bound.peek().map_or(0.0, |c| {
                self.limit[c as usize] as f64 / self.weight[c as usize] as f64
            })
        };
        level.max(f64::MIN_POSITIVE)
    }

    /// Moves children between the sides until every bound child's c/w is at most
    /// λ and every free one's at least λ (module docs).
    fn sort(&mut self, capacity_bps: u64) {
        self.capacity_bps = capacity_bps;
        loop {
            // λ = left / free_weight; with no free weight, λ is +∞ if left >= 0.
            let left = i128::from(capacity_bps) - i128::from(self.bound_bps);
            let denominator = i128::from(self.free_weight);
            let above = |limit: u64, weight: u64| {
                // c / w > λ
                if denominator == 0 {
                    left < 0
                } else {
                    i128::from(limit) * denominator > left * i128::from(weight)
                }
            };
            if let Some(child) = self.bound.peek() {
                let c = child as usize;
                if above(self.limit[c], self.weight[c]) {
                    self.bound.remove(&self.limit, &self.weight, child);
                    self.bound_bps -= self.limit[c];
                    self.free_weight += self.weight[c];
                    self.side[c] = Side::Free;
                    self.free.push(&self.limit, &self.weight, child);
                    continue;
                }
            }
            if let Some(child) = self.free.peek() {
                let c = child as usize;
                // c / w < λ (denominator > 0: this child's weight is in it)
                if i128::from(self.limit[c]) * denominator < left * i128::from(self.weight[c]) {
                    self.free.remove(&self.limit, &self.weight, child);
                    self.free_weight -= self.weight[c];
                    self.bound_bps += self.limit[c];
                    self.side[c] = Side::Bound;
                    self.bound.push(&self.limit, &self.weight, child);
                    continue;
                }
            }
            break;
        }
        debug_assert!(
            self.bound_bps <= capacity_bps,
            "the children at their limit take no more than the node has"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn demand(weight: u64, limit: Option<u64>) -> Option<Demand> {
        Some(Demand { weight, limit })
    }

    /// Water-filling written the plain way: raise λ until the capacity is used.
    fn reference(capacity: f64, children: &[Option<Demand>]) -> Vec<f64> {
        let mut rate = vec![0.0; children.len()];
        let mut open: Vec<usize> = (0..children.len())
            .filter(|&i| children[i].is_some())
            .collect();
        let mut left = capacity;
        while !open.is_empty() && left > 0.0 {
            let weights: f64 = open
                .iter()
                .map(|&i| children[i].unwrap().weight as f64)
                .sum();
            let level = left / weights;
            let (sated, hungry): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| {
                let d = children[i].unwrap();
                d.limit.is_some_and(|c| c as f64 <= level * d.weight as f64)
            });
            if sated.is_empty() {
                for &i in &hungry {
                    rate[i] = level * children[i].unwrap().weight as f64;
                }
                break;
            }
            for &i in &sated {
                rate[i] = children[i].unwrap().limit.unwrap() as f64;
                left -= rate[i];
            }
            open = hungry;
        }
        rate
    }

    #[test]
    fn a_capped_child_gets_its_weighted_share_below_its_cap() {
        // The case: 1 Gbit/s, one of five weight-1 children capped at 500.
        let mut fill = Fill::new(5, 1_000_000_000);
        fill.set(0, demand(1, Some(500_000_000)));
        for i in 1..5 {
            fill.set(i, demand(1, None));
        }
        for i in 0..5 {
            assert!((fill.rate(i, 1_000_000_000) - 2e8).abs() < 1.0);
        }
        // Capped at 150 it keeps 150 and the others share the rest.
        fill.set(0, demand(1, Some(150_000_000)));
        assert_eq!(fill.rate(0, 1_000_000_000), 1.5e8);
        assert!((fill.rate(1, 1_000_000_000) - 2.125e8).abs() < 1.0);
        assert_eq!(fill.demand(), Some(None));
    }

    proptest! {
        #[test]
        fn agrees_with_plain_water_filling(
            ops in proptest::collection::vec(
                (0usize..8, proptest::option::of((1u64..1000, proptest::option::of(1u64..20_000)))),
                1..60,
            ),
            capacities in proptest::collection::vec(1u64..40_000, 1..4),
        ) {
            let mut fill = Fill::new(8, 1);
            let mut children = vec![None; 8];
            for (step, (child, spec)) in ops.into_iter().enumerate() {
                let d = spec.map(|(weight, limit)| Demand { weight, limit });
                fill.set(child, d);
                children[child] = d;
                let capacity = capacities[step % capacities.len()];
                let want = reference(capacity as f64, &children);
                for (i, &w) in want.iter().enumerate() {
                    let got = fill.rate(i, capacity);
                    prop_assert!((got - w).abs() <= 1e-6 * capacity as f64, "{children:?} at {capacity}: child {i} {got} vs {w}");
                }
            }
        }
    }
}
