// The demo program `tools/dev demo` traces: a little of everything a call
// timeline should show — a loop of calls, recursion, a virtual call, a
// std::sort, a C++ exception thrown and caught, a second thread, and
// syscalls (file writes and reads). Sized so that its own work (about 9 M
// instructions) outweighs the dynamic loader's (about 1.7 M) and leads the
// summary.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
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
  for (int i = 0; i < 60; ++i) {
    try {
      MightThrow(i);
    } catch (const std::exception&) {
      ++caught;
    }
  }
  return caught;
}

[[gnu::noinline]] unsigned SortSome(unsigned seed) {
  std::vector<unsigned> v(20000);
  for (auto& x : v) x = seed = seed * 1103515245u + 12345u;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[gnu::noinline]] size_t WriteAndReadBack() {
  std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                     "/ptsnap-demo-" + std::to_string(reinterpret_cast<uintptr_t>(&path));
  {
    std::ofstream out(path);
    for (int i = 0; i < 50; ++i) out << "line " << i << '\n' << std::flush;
  }
  std::ifstream in(path);
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) ++lines;
  std::remove(path.c_str());
  return lines;
}

[[gnu::noinline]] void Worker(long* result) {
  for (int i = 0; i < 4; ++i) *result += Fib(20);
}

}  // namespace

int main() {
  long worker_result = 0;
  std::thread worker(Worker, &worker_result);
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
    fib += Fib(22);
    area += TotalArea(shapes);
  }
  int caught = CatchSome();
  unsigned median = SortSome(42);
  size_t lines = WriteAndReadBack();
  worker.join();
  std::printf("demo: fib %ld, area %.1f, caught %d, median %u, lines %zu, worker %ld\n", fib, area,
              caught, median, lines, worker_result);
  return 0;
}
