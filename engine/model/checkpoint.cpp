// A model directory's safetensors files: DIR/model.safetensors, or the shards that
// DIR/model.safetensors.index.json maps each tensor name to.
#include "engine/model/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"

namespace sy {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Whether `path` names a directory entry at all: a symbolic link counts even when its target is
// gone (fs::exists follows it and would report the broken link as no file).
bool present(const fs::path& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found;
}

// What keeps `path` from being read as a weight file ("does not exist", "is a symbolic link to
// X, which does not exist", "is not a regular file"), or empty when it is a regular file, itself
// or through links (the Hugging Face cache links every file to a blob).
std::string file_problem(const fs::path& path) {
  std::error_code ec;
  const fs::file_status entry = fs::symlink_status(path, ec);
  if (ec || entry.type() == fs::file_type::not_found) return "does not exist";
  const fs::file_status target = fs::status(path, ec);
  if (fs::is_symlink(entry) && (ec || target.type() == fs::file_type::not_found)) {
    std::error_code link_ec;
    const fs::path to = fs::read_symlink(path, link_ec);
    const std::string link = "is a symbolic link" + (link_ec ? std::string() : " to " + to.string());
    if (!ec || ec == std::errc::no_such_file_or_directory) return link + ", which does not exist";
    return link + " that cannot be followed: " + ec.message();
  }
  // A FIFO or device would block the loader forever, a directory is no file: regular files only.
  if (!fs::is_regular_file(target)) return "is not a regular file";
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("model directory " + dir.string() + " does not exist");
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;

  const fs::path single = dir / "model.safetensors";
  const fs::path index_path = dir / "model.safetensors.index.json";
  if (present(single)) {
    if (const std::string problem = file_problem(single); !problem.empty())
      return Status::Error(single.string() + " " + problem);
    auto file = SafetensorsFile::open(single);
    if (!file.ok()) return file.status();
    for (const auto& [name, info] : (*file)->tensors()) ckpt->index_[name] = &info;
    ckpt->files_.push_back(std::move(*file));
    ckpt->layout_ = "model.safetensors";
    return ckpt;
  }
  if (!present(index_path)) {
    return Status::Error("no model.safetensors or model.safetensors.index.json in " + dir.string());
  }

  const std::string ip = index_path.string();
  if (const std::string problem = file_problem(index_path); !problem.empty()) return Status::Error(ip + " " + problem);
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + ip);
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = parse_json(text.str());
  if (!parsed.ok()) return Status::Error(ip + " is not valid JSON: " + parsed.status().message());
  json index = std::move(parsed).value();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return Status::Error(ip + " has no 'weight_map' object (tensor name -> shard file)");
  }

  std::map<std::string, SafetensorsFile*> shards;  // by file name, each opened once
  for (const auto& [name, value] : index["weight_map"].items()) {
    if (!value.is_string()) {
      return Status::Error(ip + ": the weight_map entry of tensor '" + name + "' is not a file name: " + value.dump());
    }
    const std::string shard = value.get<std::string>();
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const fs::path shard_path = dir / shard;
      // A shard is a file of the model directory: no absolute path, no way up out of it.
      // (Symbolic links inside it are fine: the Hugging Face cache links every file to a blob.)
      const fs::path relative(shard);
      if (relative.is_absolute() || std::any_of(relative.begin(), relative.end(), [](const fs::path& part) {
            return part == "..";
          })) {
        return Status::Error(ip + " names shard '" + shard + "' (for tensor '" + name +
                             "'), which is outside the model directory " + dir.string());
      }
      // An empty name is the directory itself: no regular file either.
      if (const std::string problem = file_problem(shard_path); !problem.empty()) {
        return Status::Error(ip + " names shard '" + shard + "' (for tensor '" + name + "'), but " +
                             shard_path.string() + " " + problem);
      }
      auto file = SafetensorsFile::open(shard_path);
      if (!file.ok()) return file.status();
      it = shards.emplace(shard, file->get()).first;
      ckpt->files_.push_back(std::move(*file));
    }
    const TensorInfo* info = it->second->find(name);
    if (info == nullptr) {
      return Status::Error("tensor '" + name + "' is listed in " + ip + " under shard '" + shard + "', but " +
                           it->second->path().string() + " does not contain it");
    }
    ckpt->index_[name] = info;
  }
  // Tensors a shard holds beyond the index are still visible (transformers loads whole shards).
  for (const auto& file : ckpt->files_)
    for (const auto& [name, info] : file->tensors()) ckpt->index_.emplace(name, &info);
  ckpt->layout_ = std::to_string(ckpt->files_.size()) + " shard(s) listed by model.safetensors.index.json";
  return ckpt;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

StatusOr<const TensorInfo*> Checkpoint::get(const std::string& name) const {
  const TensorInfo* info = find(name);
  if (info == nullptr) {
    return Status::Error("tensor '" + name + "' not found in " + dir_.string() + " (" +
                         std::to_string(index_.size()) + " tensors in " + layout_ + ")");
  }
  return info;
}

std::size_t Checkpoint::tensor_count() const { return index_.size(); }

}  // namespace sy
