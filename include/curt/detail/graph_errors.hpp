// curt/detail/graph_errors.hpp: what curt says when a graph call is refused. The texts (result
// codes, reasons, flag names) need no device and are tested without one; the diagnoses that ask
// CUDA (a node's type and kernel, a graph's unclonable nodes, an executable's flags) run only on
// failure, in a context made current for them, and leave no error behind.
#pragma once

#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/launch.hpp>  // detail::kernel_name

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace curt::detail {

// ---- messages (no CUDA calls: tested without a device) ------------------------------------------

CURT_COLD inline const char* node_type_name(cudaGraphNodeType type) noexcept {
  switch (type) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "child graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event wait";
    case cudaGraphNodeTypeEventRecord: return "event record";
    case cudaGraphNodeTypeExtSemaphoreSignal: return "external semaphore signal";
    case cudaGraphNodeTypeExtSemaphoreWait: return "external semaphore wait";
    case cudaGraphNodeTypeMemAlloc: return "memory allocation";
    case cudaGraphNodeTypeMemFree: return "memory free";
    case cudaGraphNodeTypeConditional: return "conditional";
    default: return "unknown";
  }
}

// "auto_free_on_launch | device_launch", "none"; unknown bits in hexadecimal.
CURT_COLD inline std::string describe_instantiate_flags(unsigned long long flags) {
  static constexpr struct {
    unsigned long long bit;
    const char* name;
  } names[] = {{cudaGraphInstantiateFlagAutoFreeOnLaunch, "auto_free_on_launch"},
               {cudaGraphInstantiateFlagUpload, "upload"},
               {cudaGraphInstantiateFlagDeviceLaunch, "device_launch"},
               {cudaGraphInstantiateFlagUseNodePriority, "use_node_priority"}};
  std::string text;
  for (const auto& n : names) {
    if (!(flags & n.bit)) continue;
    text += text.empty() ? "" : " | ";
    text += n.name;
    flags &= ~n.bit;
  }
  if (flags) {
    char rest[32];
    std::snprintf(rest, sizeof rest, "%s0x%llx", text.empty() ? "" : " | ", flags);
    text += rest;
  }
  return text.empty() ? "none" : text;
}

CURT_COLD inline const char* instantiate_result_name(cudaGraphInstantiateResult result) noexcept {
  switch (result) {
    case cudaGraphInstantiateSuccess: return "cudaGraphInstantiateSuccess";
    case cudaGraphInstantiateError: return "cudaGraphInstantiateError";
    case cudaGraphInstantiateInvalidStructure: return "cudaGraphInstantiateInvalidStructure";
    case cudaGraphInstantiateNodeOperationNotSupported:
      return "cudaGraphInstantiateNodeOperationNotSupported";
    case cudaGraphInstantiateMultipleDevicesNotSupported:
      return "cudaGraphInstantiateMultipleDevicesNotSupported";
    case cudaGraphInstantiateConditionalHandleUnused:
      return "cudaGraphInstantiateConditionalHandleUnused";
    default: return "an unknown cudaGraphInstantiateResult";
  }
}

CURT_COLD inline const char* instantiate_result_reason(cudaGraphInstantiateResult result) noexcept {
  switch (result) {
    case cudaGraphInstantiateError:
      return "the driver did not classify the failure (the error code says what failed)";
    case cudaGraphInstantiateInvalidStructure:
      return "the graph's structure is invalid (a cycle, for instance)";
    case cudaGraphInstantiateNodeOperationNotSupported:
      return "a node does what a graph launched from the device cannot (only kernel, memcpy, "
             "memset and child-graph nodes, no dynamic parallelism)";
    case cudaGraphInstantiateMultipleDevicesNotSupported:
      return "the nodes belong to more than one device, which a device-launch graph (or one whose "
             "kernels launch graphs from the device) cannot have";
    case cudaGraphInstantiateConditionalHandleUnused:
      return "a conditional handle was made for the graph but no conditional node uses it";
    default: return "";
  }
}

CURT_COLD inline const char* update_result_name(cudaGraphExecUpdateResult result) noexcept {
  switch (result) {
    case cudaGraphExecUpdateSuccess: return "cudaGraphExecUpdateSuccess";
    case cudaGraphExecUpdateError: return "cudaGraphExecUpdateError";
    case cudaGraphExecUpdateErrorTopologyChanged: return "cudaGraphExecUpdateErrorTopologyChanged";
    case cudaGraphExecUpdateErrorNodeTypeChanged: return "cudaGraphExecUpdateErrorNodeTypeChanged";
    case cudaGraphExecUpdateErrorFunctionChanged: return "cudaGraphExecUpdateErrorFunctionChanged";
    case cudaGraphExecUpdateErrorParametersChanged:
      return "cudaGraphExecUpdateErrorParametersChanged";
    case cudaGraphExecUpdateErrorNotSupported: return "cudaGraphExecUpdateErrorNotSupported";
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange:
      return "cudaGraphExecUpdateErrorUnsupportedFunctionChange";
    case cudaGraphExecUpdateErrorAttributesChanged:
      return "cudaGraphExecUpdateErrorAttributesChanged";
    default: return "an unknown cudaGraphExecUpdateResult";
  }
}

CURT_COLD inline const char* update_result_reason(cudaGraphExecUpdateResult result) noexcept {
  switch (result) {
    case cudaGraphExecUpdateError:
      return "the driver did not classify the failure";
    case cudaGraphExecUpdateErrorTopologyChanged:
      return "the graph's topology differs from the executable graph's (nodes, dependencies or "
             "exit nodes added, removed or in another order): instantiate it instead";
    case cudaGraphExecUpdateErrorNodeTypeChanged:
      return "a node's type differs from that of the node it pairs with in the executable graph";
    case cudaGraphExecUpdateErrorFunctionChanged:
      return "a kernel node's function changed (drivers before 11.2 cannot update that)";
    case cudaGraphExecUpdateErrorParametersChanged:
      return "a node's parameters changed in a way an update cannot apply (memory of another "
             "device or context, a memcpy's memory type, a 2D/3D shape)";
    case cudaGraphExecUpdateErrorNotSupported:
      return "something about a node (its type or configuration) cannot be updated";
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange:
      return "a kernel node's function changed in a way an update cannot apply (another context, "
             "or dynamic parallelism, device-side updates or cooperative launch switched)";
    case cudaGraphExecUpdateErrorAttributesChanged:
      return "a node's attributes changed in a way an update cannot apply (its priority under "
             "use_node_priority, for instance)";
    default: return "";
  }
}

// "<result name>: <reason>", then what the driver named; `node` and `from_node` are
// descriptions (empty when the driver named none, which it does for a changed node count).
CURT_COLD inline std::string describe_update_refusal(cudaGraphExecUpdateResult result,
                                                     const std::string& node,
                                                     const std::string& from_node) {
  std::string text = update_result_name(result);
  const char* reason = update_result_reason(result);
  if (*reason) text += std::string(": ") + reason;
  if (node.empty()) return text + "; the driver names no node";
  text += "; the node in the new graph: " + node;
  if (!from_node.empty()) text += ", whose dependency on " + from_node + " does not match";
  return text;
}

// ---- descriptions that ask CUDA (cold paths only; failures leave no error behind) ---------------

// Runs `describe`, a diagnosis that asks CUDA, with a `Scope` made of `where` alive: on a thread
// with no current context, the context the calls it explains ran in, popped afterwards. If no
// context can be made current, the result is value-initialized (no diagnosis); no error is left
// behind either way.
template <class Scope, class Describe, class Where>
CURT_COLD auto diagnose_in(Describe& describe, Where where) -> decltype(describe()) {
  decltype(describe()) result{};
  try {
    Scope in_context(where);
    result = describe();
  } catch (const cuda_error&) {
  }
  (void)cudaGetLastError();
  return result;
}

// In `stream`'s context, or without one in the runtime's current device's primary context.
template <class Describe>
CURT_COLD auto diagnose(Describe describe, cudaStream_t stream = nullptr) -> decltype(describe()) {
  if (stream) return diagnose_in<stream_context_scope>(describe, stream);
  return diagnose_in<current_device_scope>(describe, -1);
}

// For a call that ran in any context (graph queries, clone, update): in a primary context that
// is active already, where one is (current_device_scope's any_context).
template <class Describe>
CURT_COLD auto diagnose(Describe describe, any_context_t) -> decltype(describe()) {
  return diagnose_in<current_device_scope>(describe, any_context);
}

// "kernel node 0x... (saxpy(float, float const*, float*, int))".
CURT_COLD inline std::string describe_node(cudaGraphNode_t node) {
  if (node == nullptr) return {};
  char address[32];
  std::snprintf(address, sizeof address, "%p", static_cast<void*>(node));
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("node ") + address;
  }
  std::string text = std::string(node_type_name(type)) + " node " + address;
  cudaKernelNodeParams params{};
  if (type == cudaGraphNodeTypeKernel) {
    if (cudaGraphKernelNodeGetParams(node, &params) == cudaSuccess && params.func) {
      std::string name = kernel_name(static_cast<const void*>(params.func));
      if (!name.empty() && name.front() != '<') text += " (" + name + ")";  // not "<unknown>"
    }
    (void)cudaGetLastError();
  }
  return text;
}

// How many nodes of `graph` have one of these types; 0 when it cannot be told.
CURT_COLD inline std::size_t count_nodes(cudaGraph_t graph,
                                         std::initializer_list<cudaGraphNodeType> types) {
  std::size_t n = 0, found = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess && n) {
    std::vector<cudaGraphNode_t> nodes(n);
    if (cudaGraphGetNodes(graph, nodes.data(), &n) == cudaSuccess)
      for (std::size_t i = 0; i < n; ++i) {
        cudaGraphNodeType type{};
        if (cudaGraphNodeGetType(nodes[i], &type) != cudaSuccess) continue;
        for (cudaGraphNodeType t : types) found += t == type;
      }
  }
  (void)cudaGetLastError();
  return found;
}

// What makes CUDA allow a graph only one executable graph at a time: its conditional nodes,
// memory allocation and free nodes, device-updatable kernel nodes (counted when an instantiation or
// update failed, and before a copy once curt made a device-updatable node).
struct single_exec_nodes {
  std::size_t conditional = 0, memory = 0, device_updatable = 0;
};

CURT_COLD inline void count_single_exec_nodes(cudaGraph_t graph, single_exec_nodes& found,
                                              int depth) {
  std::size_t n = 0;
  std::vector<cudaGraphNode_t> nodes;
  if (depth < 16 && cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess && n) {
    nodes.resize(n);
    if (cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) nodes.clear();
  }
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) continue;
    found.conditional += type == cudaGraphNodeTypeConditional;
    found.memory += type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree;
    cudaLaunchAttributeValue value{};
    if (type == cudaGraphNodeTypeKernel &&
        cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                        &value) == cudaSuccess)
      found.device_updatable += value.deviceUpdatableKernelNode.deviceUpdatable != 0;
    cudaGraph_t child = nullptr;
    if (type == cudaGraphNodeTypeGraph && cudaGraphChildGraphNodeGetGraph(node, &child) == cudaSuccess)
      count_single_exec_nodes(child, found, depth + 1);  // a moved-in child's memory nodes count
  }
  (void)cudaGetLastError();
}
CURT_COLD inline single_exec_nodes count_single_exec_nodes(cudaGraph_t graph) {
  single_exec_nodes found;
  count_single_exec_nodes(graph, found, 0);
  return found;
}

// "; the graph holds 1 conditional node(s): CUDA allows ..." for a refused instantiation of a
// graph CUDA instantiates only once at a time; empty for any other graph.
CURT_COLD inline std::string describe_single_exec(const single_exec_nodes& nodes) {
  std::string held;
  auto add = [&](std::size_t count, const char* what) {
    if (!count) return;
    held += (held.empty() ? "" : ", ") + std::to_string(count) + " " + what;
  };
  add(nodes.conditional, "conditional node(s)");
  add(nodes.memory, "memory allocation or free node(s)");
  add(nodes.device_updatable, "device-updatable kernel node(s)");
  if (held.empty()) return {};
  return "; the graph holds " + held +
         ": CUDA allows such a graph only one executable graph at a time, so if another one "
         "exists, destroy it first" +
         std::string(nodes.device_updatable ? ""
                                            : " (or give it this graph's changes with "
                                              "graph_exec::update)");
}

[[noreturn]] CURT_COLD inline void throw_instantiate_error(cudaError_t status,
                                                          const cudaGraphInstantiateParams& params,
                                                          const char* file, int line,
                                                          cudaGraph_t graph = nullptr) {
  std::string log = take_driver_log();  // before the diagnosis
  (void)cudaGetLastError();
  // In the upload stream's context when there is one, as the instantiation ran.
  const cudaStream_t upload = params.uploadStream;
  std::string why = instantiate_result_name(params.result_out);
  const char* reason = instantiate_result_reason(params.result_out);
  if (*reason) why += std::string(": ") + reason;
  why += params.errNode_out
             ? "; error node: " +
                   diagnose([&] { return describe_node(params.errNode_out); }, upload)
             : std::string("; the driver names no node");
  if (graph)
    why += describe_single_exec(diagnose([&] { return count_single_exec_nodes(graph); }, upload));
  throw_error_with_log(make_error_code(status),
                       "cudaGraphInstantiateWithParams(graph, flags " +
                           describe_instantiate_flags(params.flags) + ")",
                       location(file, line), std::move(why), std::move(log));
}

[[noreturn]] CURT_COLD inline void throw_clone_error(cudaError_t status, cudaGraph_t graph,
                                                    const char* file, int line) {
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  std::string why = diagnose(
      [&] {
        std::size_t unclonable =
            count_nodes(graph, {cudaGraphNodeTypeMemAlloc, cudaGraphNodeTypeMemFree,
                                cudaGraphNodeTypeConditional});
        if (!unclonable) return std::string();
        return "the graph holds " + std::to_string(unclonable) +
               " memory allocation, memory free or conditional nodes, and CUDA cannot clone "
               "such a graph: build or capture it again instead";
      },
      any_context);  // as the clone ran
  throw_error_with_log(make_error_code(status), "cudaGraphClone(graph)", location(file, line),
                       std::move(why), std::move(log));
}

[[noreturn]] CURT_COLD inline void throw_graph_launch_error(cudaError_t status,
                                                           cudaGraphExec_t exec, const char* call,
                                                           cudaStream_t stream, const char* file,
                                                           int line) {
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  std::string why = diagnose([&] {
    unsigned long long flags = 0;
    if (status != cudaErrorInvalidValue || cudaGraphExecGetFlags(exec, &flags) != cudaSuccess ||
        (flags & cudaGraphInstantiateFlagAutoFreeOnLaunch))
      return std::string();
    return std::string(
        "an executable graph whose last launch left memory allocated (allocation nodes without "
        "a free) cannot run again until that memory is freed (cudaFreeAsync), unless it was "
        "instantiated with instantiate_flags::auto_free_on_launch");
  }, stream);  // in the stream's context, as the launch ran
  throw_error_with_log(make_error_code(status), call, location(file, line), std::move(why),
                       std::move(log));
}

}  // namespace curt::detail
