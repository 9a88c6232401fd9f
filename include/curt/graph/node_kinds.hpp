// curt/graph/node_kinds.hpp: every kind of graph node in one place. A row of node_kinds says what
// CUDA 13.0 does with a kind (its name in messages, whether conditional bodies and device-launch
// graphs hold it, whether it is switched off, what a per-node update keeps, how a failed call
// shows it); below it, how each kind's parameters are built and what curt refuses before CUDA is
// called. A new kind is a row and a builder here, and its add_*_node. Tested without a device.
#pragma once

#include <curt/execution/host_function.hpp>
#include <curt/execution/launch.hpp>
#include <curt/memory/range.hpp>

#include <climits>
#include <tuple>

namespace curt::detail {

CURT_COLD inline std::string kernel_shape(const cudaGraphNodeParams& p) {
  return fmt("(%s, grid %s, block %s, %u B dynamic shared memory)",
             kernel_name(static_cast<const void*>(p.kernel.func)).c_str(),
             dims_text(p.kernel.gridDim).c_str(), dims_text(p.kernel.blockDim).c_str(),
             p.kernel.sharedMemBytes);
}
CURT_COLD inline std::string child_shape(const cudaGraphNodeParams& p) {
  return p.graph.ownership == cudaGraphChildGraphOwnershipMove ? "(child graph, moved in)"
                                                               : "(child graph, copied)";
}

struct node_kind {
  cudaGraphNodeType type;
  const char* name;         // "memory allocation": "a memory allocation node"
  bool in_body;             // a conditional body may hold it (in its child graphs too)
  bool device_launch;       // a graph instantiated for device launch may hold it
  bool toggles;             // set_node_enabled switches it off and on
  const char* update_rule;  // what a per-node update must keep (said when CUDA refuses one)
  std::string (*shape)(const cudaGraphNodeParams&);  // its parameters in a message; null: "()"
};
inline constexpr const char* same_memory =
    "an executable graph's memcpy and memset nodes can point only to memory of the same device "
    "and context as before (and a memcpy node cannot change between memory kinds such as host "
    "and device)";
inline constexpr node_kind node_kinds[] = {
    {cudaGraphNodeTypeKernel, "kernel", true, true, true,
     "the kernel must belong to the same context as the node's, and cannot start or stop using "
     "dynamic parallelism",
     &kernel_shape},
    {cudaGraphNodeTypeMemcpy, "memcpy", true, true, true, same_memory, nullptr},
    {cudaGraphNodeTypeMemset, "memset", true, true, true, same_memory, nullptr},
    {cudaGraphNodeTypeHost, "host", false, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeGraph, "child graph", true, true, false, nullptr, &child_shape},
    {cudaGraphNodeTypeEmpty, "empty", true, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeWaitEvent, "event wait", false, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeEventRecord, "event record", false, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeExtSemaphoreSignal, "external semaphore signal", false, false, false,
     nullptr, nullptr},
    {cudaGraphNodeTypeExtSemaphoreWait, "external semaphore wait", false, false, false, nullptr,
     nullptr},
    {cudaGraphNodeTypeMemAlloc, "memory allocation", false, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeMemFree, "memory free", false, false, false, nullptr, nullptr},
    {cudaGraphNodeTypeConditional, "conditional", true, false, false, nullptr, nullptr},
};
inline constexpr node_kind unknown_kind{cudaGraphNodeTypeCount, "unknown", false, false, false,
                                        nullptr, nullptr};
constexpr const node_kind& kind_of(cudaGraphNodeType type) noexcept {
  for (const node_kind& k : node_kinds)
    if (k.type == type) return k;
  return unknown_kind;
}
CURT_COLD inline const char* node_type_name(cudaGraphNodeType type) noexcept {
  return kind_of(type).name;
}
constexpr bool allowed_in_conditional_body(cudaGraphNodeType type) noexcept {
  return kind_of(type).in_body;
}
/// "kernel, memcpy and memset nodes": the kinds with `column` set.
CURT_COLD inline std::string kinds_with(bool node_kind::*column) {
  std::string text, last;
  for (const node_kind& k : node_kinds) {
    if (!(k.*column)) continue;
    if (!last.empty()) text += fmt("%s%s", text.empty() ? "" : ", ", last.c_str());
    last = k.name;
    for (char& c : last) c = c == ' ' ? '-' : c;  // "child-graph"
  }
  return text.empty() ? last + " nodes" : fmt("%s and %s nodes", text.c_str(), last.c_str());
}
/// "curt::add_kernel_node(saxpy(float, float*), grid 4x1x1, ...)", "curt::add_empty_node()".
CURT_COLD inline std::string describe_node_params(const char* function,
                                                  const cudaGraphNodeParams& p) {
  auto shape = kind_of(p.type).shape;
  return fmt("%s%s", function, shape ? shape(p).c_str() : "()");
}
/// cudaGraphNodeParams of `type`, every byte zero (CUDA requires the unused ones to be).
inline cudaGraphNodeParams node_params(cudaGraphNodeType type) noexcept {
  cudaGraphNodeParams params{};
  std::char_traits<char>::assign(reinterpret_cast<char*>(&params), sizeof params, '\0');
  params.type = type;
  return params;
}
/// Whether a kernel node takes launch attribute `id` (those CUDA 13.0 says are for graph nodes).
constexpr bool kernel_node_attribute_allowed(cudaLaunchAttributeID id) noexcept {
  switch (id) {
    case cudaLaunchAttributeAccessPolicyWindow: case cudaLaunchAttributeCooperative:
    case cudaLaunchAttributeClusterDimension: case cudaLaunchAttributePriority:
    case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    case cudaLaunchAttributeMemSyncDomainMap: case cudaLaunchAttributeMemSyncDomain:
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
  const std::string edge = " event is no kernel node attribute: in a graph, make the kernel node "
                           "that waits depend on this one through curt::";
  std::string why;
  if (id == cudaLaunchAttributeProgrammaticStreamSerialization)
    why = "programmatic stream serialization is no kernel node attribute: in a graph, "
          "programmatic dependent launch is an edge; give the producer among the dependencies as "
          "curt::programmatic_edge(producer)";
  else if (id == cudaLaunchAttributeProgrammaticEvent)
    why = fmt("a programmatic%sprogrammatic_edge(node)", edge.c_str());
  else if (id == cudaLaunchAttributeLaunchCompletionEvent)
    why = fmt("a launch-completion%slaunch_completion_edge(node)", edge.c_str());
  else if (id == cudaLaunchAttributePreferredSharedMemoryCarveout)
    why = "the preferred shared-memory carveout is no kernel node attribute in CUDA 13.0 "
          "(launches only): set it on the kernel with curt::set_preferred_shared_memory_carveout";
  else if (id == cudaLaunchAttributeSynchronizationPolicy)
    why = "the synchronization policy is a stream attribute, not a kernel node's";
  else
    why = fmt("launch attribute %d is not one CUDA 13.0 takes on kernel nodes", int(id));
  return why + ". Nothing was added";
}
// Refuses attributes a kernel node (an executable graph's, `updating`: any) does not take.
inline void check_kernel_config(const launch_config& config, const char* operation, bool updating) {
  for (unsigned i = 0; i < config.attribute_count(); ++i) {
    const cudaLaunchAttribute& a = config.attributes()[i];
    if (attribute_is_off(a) || (!updating && kernel_node_attribute_allowed(a.id))) continue;
    raise(cudaErrorInvalidValue, operation,
          updating ? "an executable graph's kernel node keeps the launch attributes it was "
                     "instantiated with (CUDA updates its kernel, grid, block, dynamic shared "
                     "memory and arguments only): pass a launch_config without attributes; to "
                     "change attributes, change the graph's node and instantiate again (or update "
                     "the whole executable graph). Nothing was changed"
                   : kernel_node_attribute_refusal(a.id),
          __FILE__, __LINE__);
  }
  if (CURT_UNLIKELY(config.dynamic_shared_memory_bytes() > UINT_MAX))
    raise(cudaErrorInvalidValue, operation,
          fmt("%zu B of dynamic shared memory do not fit a kernel node's 32-bit field",
              config.dynamic_shared_memory_bytes()),
          __FILE__, __LINE__);
}
inline void check_kernel_node_config(const launch_config& config, const char* operation) {
  check_kernel_config(config, operation, false);
}
inline void check_update_config(const launch_config& config, const char* operation) {
  check_kernel_config(config, operation, true);
}
// Whether the arguments convert to the kernel's parameters, checked as curt::launch checks them;
// false, and nothing more said, for a wrong count, which each caller asserts in its own words.
template <class ParamTuple, class ArgTuple>
constexpr bool arguments_fit() {
  constexpr std::size_t count = std::tuple_size_v<ParamTuple>;
  if constexpr (count == std::tuple_size_v<ArgTuple>)
    return check_arguments<ParamTuple, ArgTuple>(std::make_index_sequence<count>{});
  else
    return false;
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
inline cudaGraphNodeParams kernel_node_params(const launch_config& config, const void* kernel,
                                              void** arguments) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeKernel);
  p.kernel.func = const_cast<void*>(kernel);
  p.kernel.gridDim = config.grid_dims();
  p.kernel.blockDim = config.block_dims();
  p.kernel.sharedMemBytes = static_cast<unsigned>(config.dynamic_shared_memory_bytes());
  p.kernel.kernelParams = arguments;
  return p;
}
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
/// Checks at compile time that a memcpy (memset: Src = Dst) node can write `Dst` with `Src`.
template <class Dst, class Src = Dst>
constexpr bool memcpy_node_ranges() {
  static_assert(is_range_v<Dst> && is_range_v<Src>,
                "curt: a node's ranges must be contiguous, with data() and size()");
  if constexpr (is_range_v<Dst> && is_range_v<Src>) {
    using D = element_of_t<Dst>;
    constexpr bool same = std::is_same_v<std::remove_cv_t<D>, range_value_t<Src>>;
    static_assert(!std::is_const_v<D>, "curt: a node's destination elements are const");
    static_assert(same, "curt: a memcpy node copies between ranges of one element type only");
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<D>>,
                  "curt: a node writes bytes: the elements must be trivially copyable");
    return !std::is_const_v<D> && same && std::is_trivially_copyable_v<std::remove_cv_t<D>>;
  }
  return false;
}
/// The node copying src into dst (equal, non-zero sizes), for `operation` ("add_memcpy_node").
template <class Dst, class Src>
cudaGraphNodeParams typed_memcpy_params(Dst& dst, const Src& src, const char* operation) {
  constexpr std::size_t size = sizeof(range_value_t<Dst>);
  const auto n = static_cast<std::size_t>(dst.size()), m = static_cast<std::size_t>(src.size());
  if (CURT_UNLIKELY(n != m))
    raise(cudaErrorInvalidValue,
          fmt("curt::%s(destination of %zu elements, source of %zu elements)", operation, n, m),
          fmt("the sizes differ: the destination holds %zu elements (%zu bytes), the source %zu "
              "(%zu bytes); copy equal sizes", n, n * size, m, m * size),
          __FILE__, __LINE__);
  if (CURT_UNLIKELY(n == 0))
    raise(cudaErrorInvalidValue, fmt("curt::%s(0 elements)", operation),
          "a memcpy node copies at least one element (CUDA refuses an empty copy); add an empty "
          "node where a placeholder is needed",
          __FILE__, __LINE__);
  return memcpy_node_params(dst.data(), src.data(), n * size);
}
/// The memset node writing `count` elements of `size` bytes at `value`: 1-byte when they are all
/// equal, else 2- or 4-byte (dst aligned to its elements).
inline cudaGraphNodeParams fill_node_params(void* dst, std::size_t count, const void* value,
                                            std::size_t size, const char* operation) {
  if (CURT_UNLIKELY(count == 0))
    raise(cudaErrorInvalidValue, fmt("curt::%s(0 elements)", operation),
          "a memset node writes at least one element (CUDA refuses an empty one); add an empty "
          "node where a placeholder is needed",
          __FILE__, __LINE__);
  const auto* bytes = static_cast<const unsigned char*>(value);
  std::size_t same = 1;
  while (same < size && bytes[same] == bytes[0]) ++same;
  unsigned pattern = bytes[0];
  if (same < size && (size == 2 || size == 4) && reinterpret_cast<std::uintptr_t>(dst) % size == 0)
    copy_bytes(&pattern, bytes, size);  // little-endian: the element's value
  else if (same < size)
    raise(cudaErrorInvalidValue, fmt("curt::%s(%zu-byte value)", operation, size),
          size == 2 || size == 4
              ? fmt("the range is not aligned to its %zu-byte elements, which a 2- or 4-byte "
                    "memset node needs; a kernel node can fill it", size)
              : fmt("a memset node writes 1-, 2- or 4-byte patterns, and this value's bytes "
                    "differ; a kernel node can fill it"),
          __FILE__, __LINE__);
  const std::size_t element = same == size ? 1 : size;
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemset);
  p.memset.dst = dst;
  p.memset.value = pattern;
  p.memset.elementSize = static_cast<unsigned>(element);
  p.memset.width = count * size / element;
  p.memset.height = 1;
  p.memset.pitch = count * size;
  return p;
}
// A host node's callable, in a host_task (`task`) the graph owns, keeping what node updates gave it
// (`adopted`). A replacement made through a graph_exec owner frees the ones it replaced on its
// first run, at the next drain: launches of one executable graph run in order.
struct host_node_callable {
  void (*invoke)(host_node_callable*) = nullptr;
  deferred_task* task = nullptr;
  host_node_callable* original = nullptr;  // a replacement's: the graph's callable of its node
  cudaUserObject_t object = nullptr;        // an original's: the graph's reference to `task`
  cudaGraphNode_t node = nullptr;
  host_node_callable* next_current = nullptr;  // the owner's list of current replacements
  atomic<deferred_task*> adopted{nullptr}, replaced{nullptr};  // (not copyable)
  ~host_node_callable() {
    destroy_tasks(adopted.load(order::acquire));
    destroy_tasks(replaced.load(order::acquire));
  }
  void adopt(deferred_task* later) noexcept { push_task(adopted, later); }  // lock-free
  // A graph has no stream to rethrow on: an exception goes to the error handler.
  static void CUDART_CB run(void* self) noexcept {
    auto* callable = static_cast<host_node_callable*>(self);
    if (CURT_UNLIKELY(callable->replaced.load(order::relaxed) != nullptr))  // its predecessor
      if (deferred_task* old = callable->replaced.exchange(nullptr, order::acquire))
        deferred().push(old);
    try {
      callable->invoke(callable);
    } catch (...) {
      deferred_work::report_orphan(std::current_exception(), 0, "in a graph");
    }
  }
};
template <class F>
struct host_node_call : host_node_callable {
  F function;
  template <class G>
  explicit host_node_call(G&& f) : function(std::forward<G>(f)) {
    invoke = [](host_node_callable* self) { static_cast<host_node_call*>(self)->function(); };
  }
};
template <class F>
using host_node_task = host_task<host_node_call<std::decay_t<F>>>;
template <class F>
constexpr bool host_node_callable_v() {
  static_assert(std::is_invocable_v<std::decay_t<F>&>,
                "curt: a host node's function must be callable with no arguments");
  static_assert(std::is_constructible_v<std::decay_t<F>, F&&>,
                "curt: a host node owns its function: move a move-only one in (std::move)");
  return std::is_invocable_v<std::decay_t<F>&> && std::is_constructible_v<std::decay_t<F>, F&&>;
}
inline cudaGraphNodeParams host_node_params(host_node_callable* callable) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeHost);
  p.host.fn = &host_node_callable::run;
  p.host.userData = callable;
  return p;
}
inline cudaGraphNodeParams child_node_params(cudaGraph_t child,
                                             cudaGraphChildGraphNodeOwnership ownership) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeGraph);
  p.graph.graph = child;
  p.graph.ownership = ownership;
  return p;
}
inline cudaGraphNodeParams event_node_params(cudaGraphNodeType type, cudaEvent_t e) noexcept {
  cudaGraphNodeParams p = node_params(type);
  (type == cudaGraphNodeTypeEventRecord ? p.eventRecord.event : p.eventWait.event) = e;
  return p;
}
/// Pinned memory of device `ordinal`, mapped for the devices `access` names too.
inline cudaGraphNodeParams allocation_node_params(int ordinal, std::size_t bytes,
                                                  const cudaMemAccessDesc* access,
                                                  std::size_t count) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemAlloc);
  p.alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  p.alloc.poolProps.location = {cudaMemLocationTypeDevice, ordinal};
  p.alloc.accessDescs = count ? access : nullptr;
  p.alloc.accessDescCount = count;
  p.alloc.bytesize = bytes;
  return p;
}
inline cudaGraphNodeParams free_node_params(const void* pointer) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemFree);
  p.free.dptr = const_cast<void*>(pointer);
  return p;
}
inline cudaGraphNodeParams conditional_node_params(cudaGraphConditionalHandle handle,
                                                   cudaGraphConditionalNodeType kind,
                                                   unsigned count) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeConditional);
  p.conditional.handle = handle;
  p.conditional.type = kind;
  p.conditional.size = count;  // CUDA writes the bodies to p.conditional.phGraph_out
  return p;
}

struct result_text {  // CUDA's instantiation and update results, and what each means
  const char* name;
  const char* reason;
};
inline constexpr result_text instantiate_results[] = {
    {"Success", ""},
    {"Error", "the driver did not classify the failure (the error code says what failed)"},
    {"InvalidStructure", "the graph's structure is invalid (a cycle, for instance)"},
    {"NodeOperationNotSupported", nullptr},  // said with the node kinds: see below
    {"MultipleDevicesNotSupported",
     "the nodes belong to more than one device, which a device-launch graph (or one whose kernels "
     "launch graphs from the device) cannot have"},
    {"ConditionalHandleUnused",
     "a conditional handle was made for the graph but no conditional node uses it"}};
inline constexpr result_text update_results[] = {
    {"Success", ""},
    {"Error", "the driver did not classify the failure"},
    {"ErrorTopologyChanged",
     "the graph's topology differs from the executable graph's (nodes, dependencies or exit nodes "
     "added, removed or in another order): instantiate it instead"},
    {"ErrorNodeTypeChanged",
     "a node's type differs from that of the node it pairs with in the executable graph"},
    {"ErrorFunctionChanged", "a kernel node's function changed (drivers before 11.2 cannot)"},
    {"ErrorParametersChanged",
     "a node's parameters changed in a way an update cannot apply (memory of another device or "
     "context, a memcpy's memory type, a 2D/3D shape)"},
    {"ErrorNotSupported", "something about a node (its type or configuration) cannot be updated"},
    {"ErrorUnsupportedFunctionChange",
     "a kernel node's function changed in a way an update cannot apply (another context, or "
     "dynamic parallelism, device-side updates or cooperative launch switched)"},
    {"ErrorAttributesChanged",
     "a node's attributes changed in a way an update cannot apply (its priority under "
     "use_node_priority, for instance)"}};
// "<call><result name>: <reason>" for result `i` of `call` (cudaGraphInstantiate, ...Update).
template <std::size_t N>
CURT_COLD std::string describe_result(const result_text (&rows)[N], std::size_t i,
                                      const char* call) {
  if (i >= N) return fmt("an unknown %s result (%zu)", call, i);
  std::string text = fmt("%s%s", call, rows[i].name);
  if (rows[i].reason == nullptr)
    return fmt("%s: a node does what a graph launched from the device cannot (it holds only %s, "
               "and no dynamic parallelism)", text.c_str(),
               kinds_with(&node_kind::device_launch).c_str());
  return *rows[i].reason ? fmt("%s: %s", text.c_str(), rows[i].reason) : text;
}
// "<result name>: <reason>", then the nodes the driver named, if any.
CURT_COLD inline std::string describe_update_refusal(cudaGraphExecUpdateResult result,
                                                     const std::string& node,
                                                     const std::string& from_node) {
  std::string text = describe_result(update_results, result, "cudaGraphExecUpdate");
  if (node.empty()) return fmt("%s; the driver names no node", text.c_str());
  text += fmt("; the node in the new graph: %s", node.c_str());
  if (!from_node.empty()) text += fmt(", whose dependency on %s does not match", from_node.c_str());
  return text;
}
struct single_exec_nodes {  // what makes CUDA allow a graph one executable graph at a time
  std::size_t conditional = 0, memory = 0, device_updatable = 0;
};
// "; the graph holds 1 conditional node(s): CUDA allows ..."; empty for other graphs.
CURT_COLD inline std::string describe_single_exec(const single_exec_nodes& nodes) {
  std::string held;
  auto add = [&](std::size_t count, const char* what) {
    if (count) held += fmt("%s%zu %s", held.empty() ? "" : ", ", count, what);
  };
  add(nodes.conditional, "conditional node(s)");
  add(nodes.memory, "memory allocation or free node(s)");
  add(nodes.device_updatable, "device-updatable kernel node(s)");
  if (held.empty()) return {};
  return fmt("; the graph holds %s: CUDA allows such a graph only one executable graph at a time, "
             "so if another one exists, destroy it first%s", held.c_str(),
             nodes.device_updatable ? "" : " (or update it from this graph: graph_exec::update)");
}
/// Refuses a copy of a graph with device-updatable nodes (which the handles do not name).
inline void refuse_device_updatable_count(std::size_t updatable, const char* operation,
                                          const char* remedy) {
  if (CURT_LIKELY(updatable == 0)) return;
  raise(cudaErrorNotSupported, operation,
        fmt("the graph holds %zu device-updatable kernel node(s): a copy's nodes are not the ones "
            "their device handles (updatable_kernel_node::device_handle()) name, so changes made "
            "from the device would never reach the copy; %s. Nothing was copied", updatable,
            remedy),
        __FILE__, __LINE__);
}

}  // namespace curt::detail
