// The packed kernels' row tiles (for_each_tile in ops/packed_kernel_impl.h): every row of every
// block exactly once, in order, in ceil(m / MR) tiles of at most MR rows, none of fewer than
// MR / 2 rows where the block has more than MR, and full MR-row tiles wherever the last tile is
// not small. The bits of a product do not depend on the tiles (the packed GEMM tests check the
// products); this pins the split the speed depends on. Also the panel calls of one row tile
// (panel_calls): the calls PackedGemm::rows makes and the count the next group's prefetch is
// spread over, from one source.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "ops/packed_kernel.h"
#include "ops/packed_kernel_impl.h"

namespace {

using dllmq::kern::Block;
using dllmq::kern::GemmArgs;

struct Tile {
  int block, row, rows, p0, p1;
};

template <int MR>
std::vector<Tile> tiles_of(const std::vector<int>& ms, int panels, int group) {
  std::vector<Block> blocks;
  for (int m : ms) blocks.push_back({nullptr, 0, m, nullptr, 0});
  GemmArgs a{};
  a.blocks = blocks.data();
  a.n_blocks = int(blocks.size());
  a.p0 = 0;
  a.p1 = panels;
  std::vector<Tile> out;
  dllmq::kern::for_each_tile<MR>(a, group, [&](const Block& b, int r, int nr, int pg, int pe) {
    out.push_back({int(&b - blocks.data()), r, nr, pg, pe});
  });
  return out;
}

template <int MR>
void check_split(int m) {
  SCOPED_TRACE(testing::Message() << "MR " << MR << " m " << m);
  const std::vector<Tile> t = tiles_of<MR>({m}, 1, 4);
  ASSERT_EQ(int(t.size()), (m + MR - 1) / MR);
  int next = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].row, next);
    EXPECT_GE(t[i].rows, 1);
    EXPECT_LE(t[i].rows, MR);
    if (m > MR) {
      EXPECT_GE(t[i].rows, MR / 2);
    }
    if (i + 2 < t.size()) {  // every tile but the last two is full
      EXPECT_EQ(t[i].rows, MR);
    }
    next += t[i].rows;
  }
  EXPECT_EQ(next, m);
  // A last tile of MR / 2 rows or more stays as it is.
  if (m % MR >= MR / 2 || m % MR == 0) {
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      EXPECT_EQ(t[i].rows, MR);
    }
  }
}

TEST(RowTiles, CoverEveryRowOnceAndKeepNoTileSmall) {
  for (int m = 1; m <= 300; ++m) {
    check_split<12>(m);  // AVX-512
    check_split<6>(m);   // AVX2
    check_split<8>(m);
  }
}

TEST(RowTiles, SplitsAFewRowsTailWithTheTileBefore) {
  auto rows = [](const std::vector<Tile>& t) {
    std::vector<int> r;
    for (const Tile& x : t) r.push_back(x.rows);
    return r;
  };
  EXPECT_EQ(rows(tiles_of<12>({16}, 1, 4)), (std::vector<int>{8, 8}));
  EXPECT_EQ(rows(tiles_of<12>({13}, 1, 4)), (std::vector<int>{7, 6}));
  EXPECT_EQ(rows(tiles_of<12>({28}, 1, 4)), (std::vector<int>{12, 8, 8}));
  EXPECT_EQ(rows(tiles_of<12>({32}, 1, 4)), (std::vector<int>{12, 12, 8}));
  EXPECT_EQ(rows(tiles_of<12>({12}, 1, 4)), (std::vector<int>{12}));
  EXPECT_EQ(rows(tiles_of<12>({5}, 1, 4)), (std::vector<int>{5}));
  EXPECT_EQ(rows(tiles_of<6>({7}, 1, 4)), (std::vector<int>{4, 3}));
}

TEST(RowTiles, VisitPanelGroupsOuterAndEveryBlockInEachGroup) {
  const std::vector<Tile> t = tiles_of<12>({16, 3}, 10, 4);
  // Groups [0, 4), [4, 8), [8, 10); in each: block 0 as 8 + 8, then block 1's 3 rows.
  ASSERT_EQ(t.size(), 9u);
  for (int g = 0; g < 3; ++g) {
    const int p0 = 4 * g, p1 = g == 2 ? 10 : p0 + 4;
    const Tile* x = &t[size_t(3 * g)];
    EXPECT_EQ(x[0].block, 0);
    EXPECT_EQ(x[0].row, 0);
    EXPECT_EQ(x[1].row, 8);
    EXPECT_EQ(x[2].block, 1);
    EXPECT_EQ(x[2].rows, 3);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(x[i].p0, p0);
      EXPECT_EQ(x[i].p1, p1);
    }
  }
}

// The panels of each call of panel_calls<AT_ONCE> over [p, pe).
template <int AT_ONCE>
std::vector<std::pair<int, int>> calls_of(int p, int pe) {
  std::vector<std::pair<int, int>> out;
  dllmq::kern::panel_calls<AT_ONCE>(p, pe, [&](int q, auto np) { out.push_back({q, np.value}); });
  return out;
}

template <int AT_ONCE>
void check_panel_calls(int p, int pe) {
  SCOPED_TRACE(testing::Message() << "at once " << AT_ONCE << " panels [" << p << ", " << pe
                                  << ")");
  const auto c = calls_of<AT_ONCE>(p, pe);
  int next = p;
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].first, next);  // every panel once, in order
    EXPECT_TRUE(c[i].second == AT_ONCE || c[i].second == 2 || c[i].second == 1);
    EXPECT_LE(c[i].second, AT_ONCE);
    if (i > 0) {
      EXPECT_LE(c[i].second, c[i - 1].second);  // the widest calls first
    }
    next += c[i].second;
  }
  EXPECT_EQ(next, pe > p ? pe : p);
  // As many calls of AT_ONCE panels as fit, then at most one pair (AT_ONCE 4) and one single.
  int full = 0, pairs = 0, singles = 0;
  for (const auto& x : c) {
    full += x.second == AT_ONCE;
    pairs += AT_ONCE > 2 && x.second == 2;
    singles += AT_ONCE > 1 && x.second == 1;
  }
  const int np = pe > p ? pe - p : 0;
  EXPECT_EQ(full, np / AT_ONCE);
  EXPECT_LE(pairs, 1);
  EXPECT_LE(singles, 1);
}

TEST(PanelCalls, CoverEveryPanelOnceWidestCallsFirst) {
  for (int p = 0; p < 3; ++p)
    for (int pe = p; pe <= p + 11; ++pe) {
      check_panel_calls<1>(p, pe);
      check_panel_calls<2>(p, pe);
      check_panel_calls<4>(p, pe);
    }
  using C = std::vector<std::pair<int, int>>;
  EXPECT_EQ(calls_of<4>(0, 7), (C{{0, 4}, {4, 2}, {6, 1}}));
  EXPECT_EQ(calls_of<4>(2, 5), (C{{2, 2}, {4, 1}}));
  EXPECT_EQ(calls_of<2>(0, 5), (C{{0, 2}, {2, 2}, {4, 1}}));
  EXPECT_EQ(calls_of<1>(3, 5), (C{{3, 1}, {4, 1}}));
  EXPECT_TRUE(calls_of<4>(4, 4).empty());
}

}  // namespace
