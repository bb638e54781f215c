// Slurm hostlist expressions, both ways: "gpu-[01-04,07],login1" <-> the host names. Follows
// Slurm's rules: bracket groups of numbers and ranges, zero padding kept from the range's lower
// bound, several groups in one name expand as a product, commas inside brackets do not split.
// Pure; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cohort {

/// The host names of `expression` in order; nullopt when it is malformed (unbalanced brackets,
/// a bad range, more than `limit` names or 64 MiB of them, more than 8 bracket groups in one
/// name).
std::optional<std::vector<std::string>> expand_hostlist(const std::string& expression,
                                                        size_t limit = 1 << 20);

/// The first host name of `expression`, which is checked whole as expand_hostlist checks it but
/// not expanded (a step's rendezvous host, whatever the size of its node list); nullopt when it
/// is malformed or names no host.
std::optional<std::string> first_host(const std::string& expression);

/// The first `count` host names of `expression` (fewer when it names fewer), in
/// expand_hostlist's order, the expression checked whole but the rest of its names never made:
/// a node list of millions costs what its first names do. nullopt when it is malformed.
std::optional<std::vector<std::string>> first_hosts(const std::string& expression, size_t count);

/// The shortest usual form: consecutive numbered hosts with the same prefix, suffix and width
/// become one bracket group ("node[1-3,5]"). Order of first appearance is kept.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace cohort
