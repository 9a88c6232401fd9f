// curt/detail/graph_node_add.hpp: how curt adds a node to a graph (zeroed cudaGraphNodeParams,
// cudaGraphAddNode with edge data), what it refuses before CUDA is called (attributes kernel nodes
// do not take, null dependencies, host, event and memory nodes in a conditional body, fills no
// memset writes), and what it says when CUDA refuses (a dependency of another graph or given
// twice, an edge with data that does not join two kernel nodes, a child graph CUDA cannot embed).
// Also the callable of a host node, owned by its graph. The refusals and messages call no CUDA
// function and are tested without a device; the diagnoses that ask CUDA run only on failure.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/graph_bodies.hpp>
#include <curt/detail/graph_errors.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/graph_node.hpp>
#include <curt/launch.hpp>

#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt::detail {

// The handle of a graph_ref (or graph_exec_ref) for a call, naming the operation when the ref
// holds none (owners that are empty, moved-from or released).
class graph_access : public graph_ref {
 public:
  explicit graph_access(graph_ref g) noexcept : graph_ref(g) {}
  cudaGraph_t handle(const char* operation) const { return native(operation); }
};
class graph_exec_access : public graph_exec_ref {
 public:
  explicit graph_exec_access(graph_exec_ref e) noexcept : graph_exec_ref(e) {}
  cudaGraphExec_t handle(const char* operation) const { return native(operation); }
};

/// cudaGraphNodeParams of `type`, every byte zero (CUDA requires the unused ones to be).
inline cudaGraphNodeParams node_params(cudaGraphNodeType type) noexcept {
  cudaGraphNodeParams params{};
  std::memset(static_cast<void*>(&params), 0, sizeof params);
  params.type = type;
  return params;
}

// ---- messages (no CUDA calls: tested without a device) ------------------------------------------

/// Whether CUDA runs nodes of `type` inside a conditional body.
constexpr bool allowed_in_conditional_body(cudaGraphNodeType type) noexcept {
  return type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeEmpty ||
         type == cudaGraphNodeTypeGraph || type == cudaGraphNodeTypeMemset ||
         type == cudaGraphNodeTypeMemcpy || type == cudaGraphNodeTypeConditional;
}

CURT_COLD inline const char* conditional_kind_name(cudaGraphConditionalNodeType kind,
                                                   unsigned bodies) noexcept {
  switch (kind) {
    case cudaGraphCondTypeIf: return bodies == 2 ? "IF/ELSE" : "IF";
    case cudaGraphCondTypeWhile: return "WHILE";
    case cudaGraphCondTypeSwitch: return "SWITCH";
    default: return "unknown";
  }
}

/// "the ELSE body of a conditional IF/ELSE node", "body 2 (of 4) of a conditional SWITCH node".
CURT_COLD inline std::string describe_conditional_body(const conditional_body_entry& body) {
  const char* kind = conditional_kind_name(body.kind, body.count);
  std::string which;
  if (body.kind == cudaGraphCondTypeIf && body.count == 2)
    which = body.index == 0 ? "the IF body" : "the ELSE body";
  else if (body.kind == cudaGraphCondTypeSwitch)
    which = "body " + std::to_string(body.index) + " (of " + std::to_string(body.count) + ")";
  else
    which = "the body";
  return which + " of a conditional " + kind + " node";
}

/// Why a node of `type` cannot go into `body`.
CURT_COLD inline std::string describe_body_refusal(cudaGraphNodeType type,
                                                   const conditional_body_entry& body) {
  return "this graph is " + describe_conditional_body(body) +
         ", and a conditional body holds only kernel, empty, child-graph, memset, memcpy and "
         "conditional nodes: CUDA runs no " +
         std::string(node_type_name(type)) + " nodes there. Nothing was added";
}

/// Refuses, before CUDA is called, a node of `type` in a graph that is a conditional body curt
/// made. One load when no conditional node was ever made.
inline void refuse_in_conditional_body(cudaGraph_t graph, cudaGraphNodeType type,
                                       const char* operation) {
  if (allowed_in_conditional_body(type)) return;
  conditional_bodies& table = conditional_body_table();
  if (CURT_LIKELY(table.empty())) return;
  conditional_body_entry body;
  if (!table.find(graph, body)) return;
  raise(cudaErrorNotSupported, operation, describe_body_refusal(type, body), __FILE__, __LINE__);
}

/// Whether a kernel node takes launch attribute `id` (CUDA 13.0: those documented "valid for
/// graph nodes").
constexpr bool kernel_node_attribute_allowed(cudaLaunchAttributeID id) noexcept {
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow:
    case cudaLaunchAttributeCooperative:
    case cudaLaunchAttributeClusterDimension:
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    case cudaLaunchAttributePriority:
    case cudaLaunchAttributeMemSyncDomainMap:
    case cudaLaunchAttributeMemSyncDomain:
    case cudaLaunchAttributePreferredClusterDimension:
    case cudaLaunchAttributeDeviceUpdatableKernelNode:
    case cudaLaunchAttributeNvlinkUtilCentricScheduling:
      return true;
    default:
      return false;
  }
}

/// An attribute that asks for nothing (programmatic serialization switched off): left out.
inline bool attribute_is_off(const cudaLaunchAttribute& a) noexcept {
  return a.id == cudaLaunchAttributeProgrammaticStreamSerialization &&
         a.val.programmaticStreamSerializationAllowed == 0;
}

/// Why a kernel node does not take attribute `id`, and what to do instead.
CURT_COLD inline std::string kernel_node_attribute_refusal(cudaLaunchAttributeID id) {
  switch (id) {
    case cudaLaunchAttributeProgrammaticStreamSerialization:
      return "programmatic stream serialization is no kernel node attribute: in a graph, "
             "programmatic dependent launch is an edge; give the producer among the dependencies "
             "as curt::programmatic_edge(producer). Nothing was added";
    case cudaLaunchAttributeProgrammaticEvent:
      return "a programmatic event is no kernel node attribute: in a graph, make the consumer "
             "kernel node depend on this one through curt::programmatic_edge(node) (or add an "
             "event record node after it). Nothing was added";
    case cudaLaunchAttributeLaunchCompletionEvent:
      return "a launch-completion event is no kernel node attribute: in a graph, make the kernel "
             "node that waits depend on this one through curt::launch_completion_edge(node) (or "
             "add an event record node after it). Nothing was added";
    case cudaLaunchAttributePreferredSharedMemoryCarveout:
      return "the preferred shared-memory carveout is no kernel node attribute in CUDA 13.0 "
             "(launches only): set it on the kernel with "
             "curt::set_preferred_shared_memory_carveout. Nothing was added";
    case cudaLaunchAttributeSynchronizationPolicy:
      return "the synchronization policy is a stream attribute, not a kernel node's. Nothing was "
             "added";
    default:
      return "launch attribute " + std::to_string(static_cast<int>(id)) +
             " is not one CUDA 13.0 takes on kernel nodes. Nothing was added";
  }
}

/// Refuses, before CUDA is called, a configuration a kernel node cannot have.
inline void check_kernel_node_config(const launch_config& config, const char* operation) {
  for (unsigned i = 0; i < config.attribute_count(); ++i) {
    const cudaLaunchAttribute& a = config.attributes()[i];
    if (!kernel_node_attribute_allowed(a.id) && !attribute_is_off(a))
      raise(cudaErrorInvalidValue, operation, kernel_node_attribute_refusal(a.id), __FILE__,
            __LINE__);
  }
  if (config.dynamic_shared_memory_bytes() > UINT_MAX)
    raise(cudaErrorInvalidValue, operation,
          std::to_string(config.dynamic_shared_memory_bytes()) +
              " B of dynamic shared memory do not fit a kernel node's 32-bit field",
          __FILE__, __LINE__);
}

/// Refuses a null dependency before CUDA is called.
inline void check_dependencies(const node_dependencies& dependencies, const char* operation) {
  for (std::size_t i = 0; i < dependencies.size(); ++i)
    if (CURT_UNLIKELY(dependencies.nodes()[i] == nullptr))
      raise(cudaErrorInvalidValue, operation,
            "dependency " + std::to_string(i) + " is a null node (a default-constructed "
            "graph_node?). Nothing was added",
            __FILE__, __LINE__);
}

// ---- the failure path (asks CUDA, only once CUDA has refused) -----------------------------------

CURT_COLD inline std::string describe_node_params(const char* function,
                                                  const cudaGraphNodeParams& p) {
  std::string text = function;
  switch (p.type) {
    case cudaGraphNodeTypeKernel: {
      std::string name = kernel_name(static_cast<const void*>(p.kernel.func));
      text += "(" + name + ", grid " + dims_text(p.kernel.gridDim) + ", block " +
              dims_text(p.kernel.blockDim) + ", " + std::to_string(p.kernel.sharedMemBytes) +
              " B dynamic shared memory)";
      break;
    }
    case cudaGraphNodeTypeMemcpy:
      text += "(" + std::to_string(p.memcpy.copyParams.extent.width) + " bytes)";
      break;
    case cudaGraphNodeTypeMemset:
      text += "(" + std::to_string(p.memset.width) + " elements of " +
              std::to_string(p.memset.elementSize) + " bytes, value " +
              std::to_string(p.memset.value) + ")";
      break;
    case cudaGraphNodeTypeMemAlloc:
      text += "(" + std::to_string(p.alloc.bytesize) + " bytes on device " +
              std::to_string(p.alloc.poolProps.location.id) + ")";
      break;
    case cudaGraphNodeTypeGraph:
      text += p.graph.ownership == cudaGraphChildGraphOwnershipMove ? "(child graph, moved in)"
                                                                    : "(child graph, copied)";
      break;
    default:
      text += "()";
  }
  return text;
}

// Why CUDA refused to add a node, where it can be told: a dependency that is not a node of the
// graph or given twice, an edge with data that does not join two kernel nodes, a child graph
// CUDA cannot embed.
CURT_COLD inline std::string explain_add_node_failure(cudaGraph_t graph,
                                                      const node_dependencies& dependencies,
                                                      const cudaGraphNodeParams& p) {
  if (!dependencies.empty()) {
    std::size_t n = 0;
    std::vector<cudaGraphNode_t> nodes;
    bool listed = cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess;
    if (listed) {
      nodes.resize(n);
      listed = n == 0 || cudaGraphGetNodes(graph, nodes.data(), &n) == cudaSuccess;
    }
    (void)cudaGetLastError();
    for (std::size_t i = 0; i < dependencies.size(); ++i) {
      cudaGraphNode_t d = dependencies.nodes()[i];
      for (std::size_t j = 0; j < i; ++j)
        if (dependencies.nodes()[j] == d)
          return "dependency " + std::to_string(i) + " repeats dependency " + std::to_string(j) +
                 ": name each node once";
      bool found = false;
      for (cudaGraphNode_t m : nodes) found = found || m == d;
      if (listed && !found)
        return "dependency " + std::to_string(i) + " (" + describe_node(d) +
               ") is not a node of this graph";
    }
    const cudaGraphEdgeData* data = dependencies.data();
    for (std::size_t i = 0; data && i < dependencies.size(); ++i) {
      if (data[i].type == cudaGraphDependencyTypeDefault && data[i].from_port == 0 &&
          data[i].to_port == 0)
        continue;
      cudaGraphNodeType from{};
      bool kernel_from = cudaGraphNodeGetType(dependencies.nodes()[i], &from) == cudaSuccess &&
                         from == cudaGraphNodeTypeKernel;
      (void)cudaGetLastError();
      if (!kernel_from || p.type != cudaGraphNodeTypeKernel)
        return "dependency " + std::to_string(i) +
               " is a programmatic or launch-completion edge, which joins two kernel nodes; here "
               "it joins " +
               std::string(kernel_from ? "kernel" : node_type_name(from)) + " node -> " +
               node_type_name(p.type) + " node";
      if (data[i].to_port != 0) return "an edge's to_port must be 0 (no node has other input ports)";
    }
  }
  if (p.type == cudaGraphNodeTypeGraph) {
    std::size_t conditional = count_nodes(p.graph.graph, {cudaGraphNodeTypeConditional});
    if (conditional)
      return "the child graph holds " + std::to_string(conditional) +
             " conditional node(s), and CUDA cannot embed such a graph as a child: add its work "
             "to this graph directly (its conditional nodes too)";
    std::size_t memory =
        count_nodes(p.graph.graph, {cudaGraphNodeTypeMemAlloc, cudaGraphNodeTypeMemFree});
    if (memory && p.graph.ownership != cudaGraphChildGraphOwnershipMove)
      return "the child graph holds " + std::to_string(memory) +
             " memory allocation or free node(s), which CUDA embeds only when the parent takes "
             "the child over: pass it as std::move(child) (a curt::graph)";
    if (memory)
      return "a child graph with memory nodes can be moved into a parent only once, and one that "
             "was moved can be neither copied nor moved again";
  }
  if (p.type == cudaGraphNodeTypeConditional)
    return "a conditional handle serves one conditional node, in the graph it was made for "
           "(conditional_handle::create) or in a body below it";
  return {};
}

[[noreturn]] CURT_COLD inline void throw_add_node_error(cudaError_t status, cudaGraph_t graph,
                                                       const node_dependencies& dependencies,
                                                       const cudaGraphNodeParams& params,
                                                       const char* function) {
  std::string log = take_driver_log();  // before the diagnosis, which makes calls of its own
  (void)cudaGetLastError();
  std::string call = describe_node_params(function, params);
  std::string why = diagnose([&] { return explain_add_node_failure(graph, dependencies, params); });
  throw_error_with_log(make_error_code(status), std::move(call), location(__FILE__, __LINE__),
                       std::move(why), std::move(log));
}

/// Adds the node `params` describes (cudaGraphAddNode, 13.0's form with edge data). The caller
/// has made the context current.
inline cudaGraphNode_t add_graph_node(cudaGraph_t graph, const node_dependencies& dependencies,
                                      cudaGraphNodeParams& params, const char* function) {
  cudaGraphNode_t node = nullptr;
  cudaError_t status = cudaGraphAddNode(&node, graph, dependencies.nodes(), dependencies.data(),
                                        dependencies.size(), &params);
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_add_node_error(status, graph, dependencies, params, function);
  return node;
}

/// Refuses a null node before CUDA is called.
inline void require_node(graph_node node, const char* operation) {
  if (CURT_UNLIKELY(!node.valid()))
    raise(cudaErrorInvalidValue, operation,
          "the node is null (a default-constructed graph_node): it names no node", __FILE__,
          __LINE__);
}

/// Checks the graph and dependencies, refuses a node CUDA does not run in a conditional body,
/// and returns the graph's handle. Calls no CUDA function.
inline cudaGraph_t prepare_node(graph_ref g, const node_dependencies& dependencies,
                                cudaGraphNodeType type, const char* function,
                                const char* operation) {
  cudaGraph_t graph = graph_access(g).handle(operation);
  check_dependencies(dependencies, function);
  refuse_in_conditional_body(graph, type, function);
  return graph;
}

// ---- kernel nodes ------------------------------------------------------------------------------

inline cudaGraphNodeParams kernel_node_params(const launch_config& config, const void* kernel,
                                              void** arguments) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeKernel);
  p.kernel.func = const_cast<void*>(kernel);
  p.kernel.gridDim = config.grid_dims();
  p.kernel.blockDim = config.block_dims();
  p.kernel.sharedMemBytes = static_cast<unsigned>(config.dynamic_shared_memory_bytes());
  p.kernel.kernelParams = arguments;
  p.kernel.extra = nullptr;
  return p;
}

// An attribute CUDA refused: the node is removed again, and the error names the attribute.
[[noreturn]] CURT_COLD inline void throw_attribute_error(cudaError_t status, cudaGraphNode_t node,
                                                        const launch_config& config,
                                                        const void* kernel,
                                                        const cudaLaunchAttribute& attribute) {
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  (void)cudaGraphDestroyNode(node);
  (void)cudaGetLastError();
  cudaLaunchAttribute one = attribute;
  cudaLaunchConfig_t shown = config.native(nullptr);
  shown.attrs = &one;
  shown.numAttrs = 1;
  std::string text = diagnose([&] { return describe_launch(shown, kernel); });
  std::string which = text.size() > 13 ? text.substr(13) : text;  // after "curt::launch("
  throw_error_with_log(make_error_code(status),
                       "cudaGraphKernelNodeSetAttribute(kernel node of " + which + ")",
                       location(__FILE__, __LINE__),
                       "the attribute was refused, so the node was removed again: the graph is "
                       "as it was",
                       std::move(log));
}

/// Adds the kernel node and sets the configuration's attributes on it; an attribute CUDA refuses
/// removes the node again.
inline cudaGraphNode_t add_kernel_with_attributes(cudaGraph_t graph,
                                                  const node_dependencies& dependencies,
                                                  const launch_config& config,
                                                  cudaGraphNodeParams& params) {
  current_device_scope in_context;
  cudaGraphNode_t node = add_graph_node(graph, dependencies, params, "curt::add_kernel_node");
  for (unsigned i = 0; i < config.attribute_count(); ++i) {
    const cudaLaunchAttribute& a = config.attributes()[i];
    if (attribute_is_off(a)) continue;
    cudaError_t status = cudaGraphKernelNodeSetAttribute(node, a.id, &a.val);
    if (CURT_UNLIKELY(status != cudaSuccess))
      throw_attribute_error(status, node, config, params.kernel.func, a);
  }
  return node;
}

// The kernel's arguments in its own parameter types, as <<<>>> passes them, and their addresses.
template <class... Params>
struct kernel_arguments {
  std::tuple<std::decay_t<Params>...> values;
  void* pointers[sizeof...(Params) + 1];

  template <class... Args>
  explicit kernel_arguments(Args&&... args) : values(std::forward<Args>(args)...) {
    point(std::index_sequence_for<Params...>{});
  }
  kernel_arguments(const kernel_arguments&) = delete;
  kernel_arguments& operator=(const kernel_arguments&) = delete;

 private:
  template <std::size_t... I>
  void point(std::index_sequence<I...>) noexcept {
    void* each[sizeof...(Params) + 1] = {static_cast<void*>(&std::get<I>(values))..., nullptr};
    for (std::size_t i = 0; i <= sizeof...(Params); ++i) pointers[i] = each[i];
  }
};

// ---- memcpy and memset nodes --------------------------------------------------------------------

inline cudaGraphNodeParams memcpy_node_params(void* dst, const void* src,
                                              std::size_t bytes) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemcpy);
  cudaMemcpy3DParms& c = p.memcpy.copyParams;
  c.srcPtr = cudaPitchedPtr{const_cast<void*>(src), bytes, bytes, 1};
  c.dstPtr = cudaPitchedPtr{dst, bytes, bytes, 1};
  c.extent = cudaExtent{bytes, 1, 1};
  c.kind = cudaMemcpyDefault;
  return p;
}

inline cudaGraphNodeParams memset_node_params(void* dst, unsigned value, unsigned element_size,
                                              std::size_t count) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemset);
  p.memset.dst = dst;
  p.memset.value = value;
  p.memset.elementSize = element_size;
  p.memset.width = count;
  p.memset.height = 1;
  p.memset.pitch = count * element_size;
  return p;
}

/// The memset node writing `count` elements of `size` bytes, each with the bytes at `value`:
/// a 1-byte memset when those bytes are all equal, else a 2- or 4-byte one (dst aligned to its
/// elements). Refuses, before CUDA is called, what no memset node writes.
inline cudaGraphNodeParams fill_node_params(void* dst, std::size_t count, const void* value,
                                            std::size_t size, const char* operation) {
  if (CURT_UNLIKELY(count == 0))
    raise(cudaErrorInvalidValue, std::string("curt::") + operation + "(0 elements)",
          "a memset node writes at least one element (CUDA refuses an empty one); add an empty "
          "node where a placeholder is needed",
          __FILE__, __LINE__);
  unsigned char bytes[16] = {};
  bool uniform = true;
  if (size <= sizeof bytes) {
    std::memcpy(bytes, value, size);
    for (std::size_t i = 1; i < size; ++i) uniform = uniform && bytes[i] == bytes[0];
  } else {
    const auto* b = static_cast<const unsigned char*>(value);
    for (std::size_t i = 1; i < size; ++i) uniform = uniform && b[i] == b[0];
    bytes[0] = b[0];
  }
  if (uniform) return memset_node_params(dst, bytes[0], 1, count * size);
  bool aligned = reinterpret_cast<std::uintptr_t>(dst) % size == 0;
  if ((size == 2 || size == 4) && aligned) {
    unsigned pattern = 0;
    if (size == 2) {
      unsigned short half = 0;
      std::memcpy(&half, bytes, 2);
      pattern = half;
    } else {
      std::memcpy(&pattern, bytes, 4);
    }
    return memset_node_params(dst, pattern, static_cast<unsigned>(size), count);
  }
  raise(cudaErrorInvalidValue,
        std::string("curt::") + operation + "(" + std::to_string(size) + "-byte value)",
        (size == 2 || size == 4)
            ? "the range is not aligned to its " + std::to_string(size) +
                  "-byte elements, which a 2- or 4-byte memset node needs; a kernel node can fill "
                  "it"
            : std::string("a memset node writes 1-, 2- or 4-byte patterns, and this value's bytes "
                          "differ; a kernel node can fill it"),
        __FILE__, __LINE__);
}

// ---- host nodes ---------------------------------------------------------------------------------

// The callable of a host node curt made. The node's function is always run_graph_host_node and
// its argument a graph_host_callable, so that an executable graph's update of the node can find
// the callable the graph owns: the update's new callable is adopted by it, and lives as long as it
// does (until the graph and its executable graphs are gone). Destroyed on a user thread through
// curt's deferred queue, as host functions are.
struct graph_host_callable : host_task_base {
  void (*invoke)(graph_host_callable*) = nullptr;
  atomic<host_task_base*> adopted{nullptr};

  /// Takes `later` (an update's callable) into this one's lifetime. Lock-free.
  void adopt(graph_host_callable* later) noexcept {
    host_task_base* head = adopted.load(order::relaxed);
    do {
      later->next = head;
    } while (!adopted.compare_exchange_weak(head, later, order::release, order::relaxed));
  }
  void destroy_adopted() noexcept {
    host_task_base* task = adopted.exchange(nullptr, order::acquire);
    while (task) {
      host_task_base* following = task->next;
      task->destroy(task);
      task = following;
    }
  }
};

// Every launch of a host node runs this. An exception has no stream to go to (a graph may be
// launched on any): it goes to the error handler, as for a host_call captured into a graph.
inline void CUDART_CB run_graph_host_node(void* self) noexcept {
  auto* callable = static_cast<graph_host_callable*>(self);
  try {
    callable->invoke(callable);
  } catch (...) {
    host_error_table::report(std::current_exception(), 0, "in a graph");
  }
}

template <class F>
struct graph_host_task final : graph_host_callable {
  F function;

  explicit graph_host_task(F&& f) : function(std::move(f)) { set(); }
  explicit graph_host_task(const F& f) : function(f) { set(); }

  // The graph's user object (made with this task's address) was released for the last time, on
  // a runtime thread: the task goes to the deferred queue.
  static void CUDART_CB release_from_graph(void* self) noexcept {
    deferred().push(static_cast<graph_host_task*>(self));
  }

 private:
  void set() noexcept {
    invoke = &call;
    destroy = &destroy_task;
  }
  static void call(graph_host_callable* self) { static_cast<graph_host_task*>(self)->function(); }
  static void destroy_task(host_task_base* self) noexcept {
    auto* task = static_cast<graph_host_task*>(self);
    task->destroy_adopted();
    delete task;
  }
};

template <class F>
using graph_host_task_for = graph_host_task<std::decay_t<F>>;

template <class F>
constexpr bool host_node_callable() {
  static_assert(std::is_invocable_v<std::decay_t<F>&>,
                "curt: a host node's function must be callable with no arguments");
  static_assert(std::is_constructible_v<std::decay_t<F>, F&&>,
                "curt: a host node owns its function: move a move-only one in (std::move)");
  return std::is_invocable_v<std::decay_t<F>&> && std::is_constructible_v<std::decay_t<F>, F&&>;
}

inline cudaGraphNodeParams host_node_params(graph_host_callable* callable) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeHost);
  p.host.fn = &run_graph_host_node;
  p.host.userData = callable;
  return p;
}

// ---- child graphs -------------------------------------------------------------------------------

// The first node type in `child` (or its child graphs) that a conditional body cannot hold;
// cudaGraphNodeTypeCount when there is none (or it cannot be told).
inline cudaGraphNodeType forbidden_in_body(cudaGraph_t child, int depth = 0) {
  std::size_t n = 0;
  std::vector<cudaGraphNode_t> nodes;
  if (depth < 16 && cudaGraphGetNodes(child, nullptr, &n) == cudaSuccess && n) {
    nodes.resize(n);
    if (cudaGraphGetNodes(child, nodes.data(), &n) != cudaSuccess) nodes.clear();
  }
  (void)cudaGetLastError();
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) continue;
    if (!allowed_in_conditional_body(type)) return type;
    cudaGraph_t inner = nullptr;
    if (type == cudaGraphNodeTypeGraph && cudaGraphChildGraphNodeGetGraph(node, &inner) == cudaSuccess) {
      cudaGraphNodeType found = forbidden_in_body(inner, depth + 1);
      if (found != cudaGraphNodeTypeCount) return found;
    }
  }
  (void)cudaGetLastError();
  return cudaGraphNodeTypeCount;
}

// Refuses a child graph holding a node a conditional body cannot hold, when `graph` is a body curt
// made. The caller has made the context current.
inline void refuse_child_in_body(cudaGraph_t graph, cudaGraph_t child) {
  conditional_bodies& table = conditional_body_table();
  if (CURT_LIKELY(table.empty())) return;
  conditional_body_entry body;
  if (!table.find(graph, body)) return;
  cudaGraphNodeType found = forbidden_in_body(child);
  if (found == cudaGraphNodeTypeCount) return;
  raise(cudaErrorNotSupported, "curt::add_child_graph_node",
        "the child graph holds a " + std::string(node_type_name(found)) +
            " node, and this graph is " + describe_conditional_body(body) +
            ": a conditional body holds only kernel, empty, child-graph, memset, memcpy and "
            "conditional nodes, in its child graphs too. Nothing was added",
        __FILE__, __LINE__);
}

inline graph_node add_child(graph_ref g, const node_dependencies& dependencies, graph_ref child,
                            cudaGraphChildGraphNodeOwnership ownership) {
  cudaGraph_t graph = prepare_node(g, dependencies, cudaGraphNodeTypeGraph,
                                   "curt::add_child_graph_node", "add_child_graph_node()");
  cudaGraph_t inner = graph_access(child).handle("add_child_graph_node() (the child graph)");
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeGraph);
  p.graph.graph = inner;
  p.graph.ownership = ownership;
  current_device_scope in_context;
  refuse_child_in_body(graph, inner);
  if (ownership == cudaGraphChildGraphOwnershipClone)
    refuse_device_updatable_copy(inner, "curt::add_child_graph_node(child graph, copied)",
                                 "move the graph in instead, curt::add_child_graph_node(parent, "
                                 "dependencies, std::move(child)): the handles then name the "
                                 "parent's nodes");
  return add_graph_node(graph, dependencies, p, "curt::add_child_graph_node");
}

// The capturing graph of `stream` and what its next work depends on. Refuses a stream whose
// capture was invalidated, and one that is not capturing, saying `not_capturing` (what to do
// instead).
struct capture_point {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
};
inline constexpr const char* not_capturing_use_graph =
    "the stream is not capturing: pass the graph itself to add to a graph that is not being "
    "captured";
inline capture_point active_capture(cudaStream_t stream, const char* operation,
                                    const char* not_capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  capture_point point;
  check(cudaStreamGetCaptureInfo(stream, &status, nullptr, &point.graph, &point.nodes, &point.data,
                                 &point.count),
        "cudaStreamGetCaptureInfo(stream)", __FILE__, __LINE__);
  if (CURT_UNLIKELY(status != cudaStreamCaptureStatusActive))
    raise(status == cudaStreamCaptureStatusInvalidated ? cudaErrorStreamCaptureInvalidated
                                                       : cudaErrorIllegalState,
          operation,
          status == cudaStreamCaptureStatusInvalidated
              ? "the stream's capture was invalidated by an earlier error: there is no graph to "
                "add to; end the capture first"
              : not_capturing,
          __FILE__, __LINE__);
  return point;
}

}  // namespace curt::detail
