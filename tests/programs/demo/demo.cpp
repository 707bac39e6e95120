// The demo program `tools/dev demo` traces: a little of everything a call
// timeline should show — a loop of calls, recursion, a virtual call, a
// std::sort, and a C++ exception thrown and caught.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

[[gnu::noinline]] long Fib(int n) { return n < 2 ? n : Fib(n - 1) + Fib(n - 2); }

struct Shape {
  virtual ~Shape() = default;
  [[nodiscard]] virtual double Area() const = 0;
};
struct Square : Shape {
  explicit Square(double s) : side(s) {}
  [[nodiscard]] double Area() const override { return side * side; }
  double side;
};
struct Circle : Shape {
  explicit Circle(double r) : radius(r) {}
  [[nodiscard]] double Area() const override { return 3.14159 * radius * radius; }
  double radius;
};

[[gnu::noinline]] double TotalArea(const std::vector<std::unique_ptr<Shape>>& shapes) {
  double total = 0;
  for (const auto& s : shapes) total += s->Area();
  return total;
}

[[gnu::noinline]] void MightThrow(int i) {
  if (i % 7 == 3) throw std::runtime_error("seven");
}

[[gnu::noinline]] int CatchSome() {
  int caught = 0;
  for (int i = 0; i < 20; ++i) {
    try {
      MightThrow(i);
    } catch (const std::exception&) {
      ++caught;
    }
  }
  return caught;
}

[[gnu::noinline]] unsigned SortSome(unsigned seed) {
  std::vector<unsigned> v(200);
  for (auto& x : v) x = seed = seed * 1103515245u + 12345u;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < 8; ++i) {
    if (i % 2) {
      shapes.push_back(std::make_unique<Square>(i));
    } else {
      shapes.push_back(std::make_unique<Circle>(i));
    }
  }
  long fib = 0;
  double area = 0;
  for (int round = 0; round < 3; ++round) {
    fib += Fib(15);
    area += TotalArea(shapes);
  }
  int caught = CatchSome();
  unsigned median = SortSome(42);
  std::printf("demo: fib %ld, area %.1f, caught %d, median %u\n", fib, area, caught, median);
  return 0;
}
