//! Entity types: the property schema of each type and the registry of types.
//!
//! Owns [`EntityType`] (ordered property definitions with value types and
//! [`SyncFlags`]), record definitions for structured container elements, the
//! [`PropLimits`] bounds, the [`TypeRegistry`] and the two built-in types
//! (`Avatar`, `Npc`). It holds no entity state and does no encoding.
//!
//! # Levels of detail
//!
//! A property other clients see may carry a [`Detail`] (BigWorld's LoD for
//! properties): its changes go only to clients within that distance of the
//! entity (a band of `[view] bands`, or metres). The schema only records
//! the level; `core::view` (the observer) applies it per client.

use super::flags::{Audience, SyncFlags};
use thiserror::Error;

/// At most this many properties per entity type (dirty state is one `u64`).
pub const PROPS_PER_TYPE_MAX: usize = 64;
/// At most this many fields per record type (visibility is one `u64` mask).
pub const FIELDS_PER_RECORD_MAX: usize = 64;

/// Most distance bands a [`Detail::Band`] may name (`[view] bands` has at
/// most this many; `core::view::budget::BANDS_MAX` is asserted equal).
pub const DETAIL_BANDS_MAX: u8 = 4;

/// A property's level of detail: its changes reach only the clients within
/// this distance (ground metres) of the entity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Detail {
    /// Within band `b` of `[view] bands` (0 = the nearest); the last band
    /// (or any beyond it) means the whole view.
    Band(u8),
    /// Within this many metres.
    WithinM(f32),
}

/// An entity type, index into the [`TypeRegistry`].
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Default,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub struct EntityTypeId(pub u16);

/// A record type, index into its entity type's record list.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RecordId(pub u16);

/// A scalar value type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScalarType {
    /// `i64`.
    Int,
    /// `u64`.
    UInt,
    /// `f64`.
    Float,
    /// `bool`.
    Bool,
    /// UTF-8 string (at most [`PropLimits::str_len_max`] bytes).
    Str,
}

/// The key type of a map property.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyType {
    /// `i64` keys.
    Int,
    /// String keys.
    Str,
}

/// The element type of a container.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ElemType {
    /// A scalar element.
    Scalar(ScalarType),
    /// A record element whose fields carry their own flags.
    Record(RecordId),
}

/// The value type of a property.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PropType {
    /// A scalar.
    Scalar(ScalarType),
    /// A record (sent whole when it changes, fields filtered per audience).
    Record(RecordId),
    /// An array whose operations are logged and replayed.
    Array(ElemType),
    /// An ordered map whose operations are logged and replayed.
    Map(KeyType, ElemType),
}

impl From<ElemType> for PropType {
    fn from(e: ElemType) -> PropType {
        match e {
            ElemType::Scalar(s) => PropType::Scalar(s),
            ElemType::Record(r) => PropType::Record(r),
        }
    }
}

impl PropType {
    /// True for arrays and maps.
    pub const fn is_container(self) -> bool {
        matches!(self, PropType::Array(_) | PropType::Map(..))
    }
}

/// One field of a record type.
#[derive(Clone, Debug)]
pub struct FieldDef {
    /// Field name.
    pub name: String,
    /// Field type.
    pub ty: ScalarType,
    /// Who sees this field; must be a subset of the containing property's flags.
    pub flags: SyncFlags,
}

/// A record type (structured container element).
#[derive(Clone, Debug)]
pub struct RecordDef {
    /// Record name.
    pub name: String,
    /// Fields, in wire order.
    pub fields: Vec<FieldDef>,
}

impl RecordDef {
    /// Bit `i` set if field `i` is visible to `aud`.
    pub fn visible_mask(&self, aud: Audience) -> u64 {
        self.fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.flags.visible_to(aud))
            .fold(0, |m, (i, _)| m | 1 << i)
    }
}

/// One property of an entity type.
#[derive(Clone, Debug)]
pub struct PropDef {
    /// Property name.
    pub name: String,
    /// Position in the type (and on the wire).
    pub index: u8,
    /// Value type.
    pub ty: PropType,
    /// Who receives it.
    pub flags: SyncFlags,
    /// For containers: index of its op-log slot in the entity's store.
    pub container_slot: Option<u8>,
    /// The owner's client may set it (a SetProp); the gateway refuses
    /// SetProp on every other property (`prop-not-settable`).
    pub client_settable: bool,
    /// Its level of detail (only for properties other clients see): other
    /// clients farther away are not sent its changes.
    pub detail: Option<Detail>,
}

/// Bounds on property values, checked on set and on decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PropLimits {
    /// Longest string, in bytes. Default 1024.
    pub str_len_max: usize,
    /// Most elements in an array or map. Default 4096.
    pub container_len_max: usize,
    /// Most bytes of logged operations per container per audience before the
    /// container is sent whole instead. Default 1024.
    pub op_log_bytes_max: usize,
}

impl Default for PropLimits {
    fn default() -> Self {
        PropLimits {
            str_len_max: 1024,
            container_len_max: 4096,
            op_log_bytes_max: 1024,
        }
    }
}

/// Why a type definition was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SchemaError {
    /// More than [`PROPS_PER_TYPE_MAX`] properties or [`FIELDS_PER_RECORD_MAX`] fields.
    #[error("too many properties or fields in {0}")]
    TooMany(String),
    /// Two properties, fields, records or types share a name.
    #[error("duplicate name {0}")]
    Duplicate(String),
    /// Flags with other clients but no ghosts, or a field seen by more than its property.
    #[error("invalid flags on {0}")]
    BadFlags(String),
    /// A record id that was not defined.
    #[error("unknown record in {0}")]
    UnknownRecord(String),
    /// A detail level on a property other clients do not see, on an
    /// unknown property, or out of range (a band over
    /// [`DETAIL_BANDS_MAX`], metres not finite and > 0).
    #[error("invalid detail level on {0}")]
    BadDetail(String),
    /// The registry is full (`u16` type ids).
    #[error("type registry full")]
    RegistryFull,
}

/// A complete entity type.
#[derive(Clone, Debug)]
pub struct EntityType {
    id: EntityTypeId,
    name: String,
    props: Vec<PropDef>,
    records: Vec<RecordDef>,
    limits: PropLimits,
    containers: usize,
    detail_mask: u64,
    /// [`EntityType::visible_mask`] per audience, in `Audience` order
    /// (worked out once: a change set asks for three of them).
    visible: [u64; 4],
}

impl EntityType {
    /// The id given by the registry.
    pub fn id(&self) -> EntityTypeId {
        self.id
    }
    /// The type name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Properties in index order.
    pub fn props(&self) -> &[PropDef] {
        &self.props
    }
    /// A property by index.
    pub fn prop(&self, index: usize) -> Option<&PropDef> {
        self.props.get(index)
    }
    /// A property index by name.
    pub fn prop_index(&self, name: &str) -> Option<usize> {
        self.props.iter().position(|p| p.name == name)
    }
    /// A record definition.
    ///
    /// # Panics
    /// If `id` was not defined (the builder checks every use).
    pub fn record(&self, id: RecordId) -> &RecordDef {
        &self.records[usize::from(id.0)]
    }
    /// Value bounds.
    pub fn limits(&self) -> &PropLimits {
        &self.limits
    }
    /// Number of container properties (op-log slots).
    pub fn containers(&self) -> usize {
        self.containers
    }
    /// Bit `i` set if property `i` is visible to `aud`.
    #[inline]
    pub fn visible_mask(&self, aud: Audience) -> u64 {
        self.visible[aud as usize]
    }
    /// Bit `i` set if property `i` leaves the real: visible to its ghosts,
    /// its own client or other clients. A change to the others (real-only
    /// state, e.g. `last_input_seq`) makes no change set.
    #[inline]
    pub fn remote_mask(&self) -> u64 {
        self.visible[Audience::Ghost as usize]
            | self.visible[Audience::OwnClient as usize]
            | self.visible[Audience::OtherClients as usize]
    }
    /// Bit `i` set if property `i` has a level of detail.
    pub fn detail_mask(&self) -> u64 {
        self.detail_mask
    }
}

/// Builds an [`EntityType`]; [`TypeRegistry::register`] validates it.
#[derive(Clone, Debug)]
pub struct EntityTypeBuilder {
    name: String,
    props: Vec<(String, PropType, SyncFlags)>,
    settable: Vec<String>,
    details: Vec<(String, Detail)>,
    records: Vec<RecordDef>,
    limits: PropLimits,
}

impl EntityTypeBuilder {
    /// A type with no properties and default limits.
    pub fn new(name: &str) -> Self {
        EntityTypeBuilder {
            name: name.to_owned(),
            props: Vec::new(),
            settable: Vec::new(),
            details: Vec::new(),
            records: Vec::new(),
            limits: PropLimits::default(),
        }
    }

    /// Sets the value limits.
    pub fn limits(mut self, limits: PropLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Defines a record type and returns its id (for use in container types).
    pub fn record(&mut self, name: &str, fields: &[(&str, ScalarType, SyncFlags)]) -> RecordId {
        let id = RecordId(self.records.len() as u16);
        self.records.push(RecordDef {
            name: name.to_owned(),
            fields: fields
                .iter()
                .map(|&(n, ty, flags)| FieldDef {
                    name: n.to_owned(),
                    ty,
                    flags,
                })
                .collect(),
        });
        id
    }

    /// Appends a property (its index is its position).
    pub fn prop(mut self, name: &str, ty: PropType, flags: SyncFlags) -> Self {
        self.props.push((name.to_owned(), ty, flags));
        self
    }

    /// Marks property `name` as settable by its owner's client (a
    /// scalar: containers are never client-settable).
    pub fn client_settable(mut self, name: &str) -> Self {
        self.settable.push(name.to_owned());
        self
    }

    /// Gives property `name` a level of detail (it must be visible to
    /// other clients).
    pub fn detail(mut self, name: &str, detail: Detail) -> Self {
        self.details.push((name.to_owned(), detail));
        self
    }

    fn build(self, id: EntityTypeId) -> Result<EntityType, SchemaError> {
        for (name, d) in &self.details {
            let seen = self
                .props
                .iter()
                .any(|p| p.0 == *name && p.2.visible_to(Audience::OtherClients));
            let ok = match *d {
                Detail::Band(b) => b < DETAIL_BANDS_MAX,
                Detail::WithinM(m) => m.is_finite() && m > 0.0,
            };
            if !(seen && ok) {
                return Err(SchemaError::BadDetail(name.clone()));
            }
        }
        check_unique(self.details.iter().map(|d| d.0.as_str()))?;
        for name in &self.settable {
            let scalar = self
                .props
                .iter()
                .any(|p| p.0 == *name && matches!(p.1, PropType::Scalar(_)));
            if !scalar {
                return Err(SchemaError::BadFlags(format!("{name} (client-settable)")));
            }
        }
        if self.props.len() > PROPS_PER_TYPE_MAX {
            return Err(SchemaError::TooMany(self.name));
        }
        check_unique(self.props.iter().map(|p| p.0.as_str()))?;
        check_unique(self.records.iter().map(|r| r.name.as_str()))?;
        for r in &self.records {
            if r.fields.len() > FIELDS_PER_RECORD_MAX {
                return Err(SchemaError::TooMany(r.name.clone()));
            }
            check_unique(r.fields.iter().map(|f| f.name.as_str()))?;
        }
        let mut props = Vec::with_capacity(self.props.len());
        let mut containers = 0u8;
        let mut detail_mask = 0u64;
        for (i, (name, ty, flags)) in self.props.into_iter().enumerate() {
            check_prop(&self.records, &name, ty, flags)?;
            let container_slot = ty.is_container().then(|| {
                containers += 1;
                containers - 1
            });
            let client_settable = self.settable.contains(&name);
            let detail = self.details.iter().find(|d| d.0 == name).map(|d| d.1);
            if detail.is_some() {
                detail_mask |= 1 << i;
            }
            props.push(PropDef {
                name,
                index: i as u8,
                ty,
                flags,
                container_slot,
                client_settable,
                detail,
            });
        }
        let visible = [
            Audience::Real,
            Audience::Ghost,
            Audience::OwnClient,
            Audience::OtherClients,
        ]
        .map(|aud| {
            props
                .iter()
                .filter(|p| p.flags.visible_to(aud))
                .fold(0, |m, p| m | 1 << p.index)
        });
        Ok(EntityType {
            id,
            name: self.name,
            props,
            records: self.records,
            limits: self.limits,
            containers: usize::from(containers),
            detail_mask,
            visible,
        })
    }
}

fn check_unique<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), SchemaError> {
    let mut seen: Vec<&str> = names.collect();
    seen.sort_unstable();
    match seen.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(SchemaError::Duplicate(w[0].to_owned())),
        None => Ok(()),
    }
}

fn check_prop(
    records: &[RecordDef],
    name: &str,
    ty: PropType,
    flags: SyncFlags,
) -> Result<(), SchemaError> {
    if !flags.validate() {
        return Err(SchemaError::BadFlags(name.to_owned()));
    }
    let record = match ty {
        PropType::Record(r)
        | PropType::Array(ElemType::Record(r))
        | PropType::Map(_, ElemType::Record(r)) => Some(r),
        _ => None,
    };
    if let Some(r) = record {
        let def = records
            .get(usize::from(r.0))
            .ok_or_else(|| SchemaError::UnknownRecord(name.to_owned()))?;
        for f in &def.fields {
            if !f.flags.validate() || !f.flags.is_subset_of(flags) {
                return Err(SchemaError::BadFlags(format!("{name}.{}", f.name)));
            }
        }
    }
    Ok(())
}

/// All entity types known to a world, indexed by [`EntityTypeId`].
///
/// Shared read-only by every cell (wrap in `Arc`); ids are assigned in
/// registration order, so every shard must register the same types in the
/// same order (the built-ins first).
#[derive(Clone, Debug, Default)]
pub struct TypeRegistry {
    types: Vec<std::sync::Arc<EntityType>>,
}

/// Id of the built-in `Avatar` type in [`TypeRegistry::with_builtins`].
pub const AVATAR: EntityTypeId = EntityTypeId(0);
/// Id of the built-in `Npc` type in [`TypeRegistry::with_builtins`].
pub const NPC: EntityTypeId = EntityTypeId(1);

impl TypeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        TypeRegistry::default()
    }

    /// A registry holding `Avatar` ([`AVATAR`]) and `Npc` ([`NPC`]).
    pub fn with_builtins() -> Self {
        let mut reg = TypeRegistry::new();
        let avatar = reg
            .register(avatar_type())
            .expect("built-in Avatar is valid");
        let npc = reg.register(npc_type()).expect("built-in Npc is valid");
        assert_eq!((avatar, npc), (AVATAR, NPC));
        reg
    }

    /// Validates and adds a type.
    ///
    /// # Errors
    /// Any [`SchemaError`]: duplicate names, bad flags, unknown records, too many.
    pub fn register(&mut self, builder: EntityTypeBuilder) -> Result<EntityTypeId, SchemaError> {
        if self.types.iter().any(|t| t.name == builder.name) {
            return Err(SchemaError::Duplicate(builder.name));
        }
        let id = u16::try_from(self.types.len()).map_err(|_| SchemaError::RegistryFull)?;
        let ty = builder.build(EntityTypeId(id))?;
        self.types.push(std::sync::Arc::new(ty));
        Ok(EntityTypeId(id))
    }

    /// A type by id.
    pub fn get(&self, id: EntityTypeId) -> Option<&std::sync::Arc<EntityType>> {
        self.types.get(usize::from(id.0))
    }

    /// A type by name.
    pub fn by_name(&self, name: &str) -> Option<&std::sync::Arc<EntityType>> {
        self.types.iter().find(|t| t.name == name)
    }
}

/// The public properties of both built-ins. Two carry a level of detail:
/// `hp` (a health bar) goes to clients within the second band (30 m by
/// default), `buffs` (buff icons) within the nearest (15 m).
fn public_props(b: EntityTypeBuilder, buff: RecordId) -> EntityTypeBuilder {
    use PropType::*;
    use ScalarType::*;
    b.prop("name", Scalar(Str), SyncFlags::ALL_CLIENTS)
        .prop("level", Scalar(UInt), SyncFlags::ALL_CLIENTS)
        .prop("hp", Scalar(Int), SyncFlags::ALL_CLIENTS)
        .prop("max_hp", Scalar(Int), SyncFlags::ALL_CLIENTS)
        .prop("faction", Scalar(UInt), SyncFlags::CELL_PUBLIC)
        .prop(
            "buffs",
            Array(ElemType::Record(buff)),
            SyncFlags::ALL_CLIENTS,
        )
        .detail("hp", Detail::Band(1))
        .detail("buffs", Detail::Band(0))
}

fn buff_record(b: &mut EntityTypeBuilder) -> RecordId {
    use ScalarType::*;
    // `expires_ms` is the flaw seed 000 points out: one element, fields with
    // different audiences. Everyone sees the buff and its stacks; only the
    // owner and the ghosts (for combat checks) see when it runs out.
    b.record(
        "Buff",
        &[
            ("id", UInt, SyncFlags::ALL_CLIENTS),
            ("stacks", Int, SyncFlags::ALL_CLIENTS),
            ("expires_ms", UInt, SyncFlags::CELL_PUBLIC_AND_OWN),
        ],
    )
}

/// The built-in client-controlled `Avatar`: public `name`, `level`, `hp`,
/// `max_hp`, `buffs` (array of `Buff {id, stacks, expires_ms}`), `faction`
/// (ghosts only, for combat checks), a private `inventory` map (item id to
/// count, own client only), `last_input_seq` (real only: the last client
/// input whose effect was applied) and `status` (a short text the owner's
/// client may set; ghosts and the own client see it).
pub fn avatar_type() -> EntityTypeBuilder {
    use PropType::*;
    use ScalarType::*;
    let mut b = EntityTypeBuilder::new("Avatar");
    let buff = buff_record(&mut b);
    public_props(b, buff)
        .prop(
            "inventory",
            Map(KeyType::Int, ElemType::Scalar(UInt)),
            SyncFlags::OWN_CLIENT,
        )
        .prop("last_input_seq", Scalar(UInt), SyncFlags::CELL_PRIVATE)
        .prop("status", Scalar(Str), SyncFlags::CELL_PUBLIC_AND_OWN)
        .client_settable("status")
}

/// The built-in server-driven `Npc` wanderer: the same public properties as
/// `Avatar` plus real-only wander state (`wander_seed`, `home_x`, `home_z`).
pub fn npc_type() -> EntityTypeBuilder {
    use PropType::*;
    use ScalarType::*;
    let mut b = EntityTypeBuilder::new("Npc");
    let buff = buff_record(&mut b);
    public_props(b, buff)
        .prop("wander_seed", Scalar(UInt), SyncFlags::CELL_PRIVATE)
        .prop("home_x", Scalar(Float), SyncFlags::CELL_PRIVATE)
        .prop("home_z", Scalar(Float), SyncFlags::CELL_PRIVATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_masks_worked_out_once_match_every_property_s_flags() {
        let reg = TypeRegistry::with_builtins();
        for id in [AVATAR, NPC] {
            let ty = reg.get(id).expect("built-in");
            let mut remote = 0;
            for aud in [
                Audience::Real,
                Audience::Ghost,
                Audience::OwnClient,
                Audience::OtherClients,
            ] {
                let want = ty
                    .props()
                    .iter()
                    .filter(|p| p.flags.visible_to(aud))
                    .fold(0, |m, p| m | 1 << p.index);
                assert_eq!(ty.visible_mask(aud), want, "{} {aud:?}", ty.name());
                if aud != Audience::Real {
                    remote |= want;
                }
            }
            assert_eq!(ty.remote_mask(), remote, "{}", ty.name());
            assert_ne!(
                ty.visible_mask(Audience::Real),
                remote,
                "real-only ones exist"
            );
        }
    }

    #[test]
    fn builtins_register_with_fixed_ids() {
        let reg = TypeRegistry::with_builtins();
        let avatar = reg.get(AVATAR).expect("avatar");
        assert_eq!(avatar.name(), "Avatar");
        assert_eq!(reg.by_name("Npc").map(|t| t.id()), Some(NPC));
        let inv = avatar.prop_index("inventory").expect("inventory");
        assert_eq!(avatar.visible_mask(Audience::OwnClient) >> inv & 1, 1);
        assert_eq!(avatar.visible_mask(Audience::Ghost) >> inv & 1, 0);
        assert_eq!(avatar.visible_mask(Audience::OtherClients) >> inv & 1, 0);
        assert_eq!(avatar.containers(), 2);
    }

    #[test]
    fn bad_types_are_rejected() {
        let mut reg = TypeRegistry::with_builtins();
        assert_eq!(
            reg.register(avatar_type()),
            Err(SchemaError::Duplicate("Avatar".into()))
        );
        let b = EntityTypeBuilder::new("X")
            .prop(
                "a",
                PropType::Scalar(ScalarType::Int),
                SyncFlags::CELL_PUBLIC,
            )
            .prop(
                "a",
                PropType::Scalar(ScalarType::Int),
                SyncFlags::CELL_PUBLIC,
            );
        assert_eq!(reg.register(b), Err(SchemaError::Duplicate("a".into())));
        let mut b = EntityTypeBuilder::new("Y");
        let r = b.record("R", &[("f", ScalarType::Int, SyncFlags::ALL_CLIENTS)]);
        let b = b.prop(
            "arr",
            PropType::Array(ElemType::Record(r)),
            SyncFlags::CELL_PUBLIC,
        );
        assert!(matches!(reg.register(b), Err(SchemaError::BadFlags(_))));
        let b = EntityTypeBuilder::new("Z").prop(
            "arr",
            PropType::Array(ElemType::Record(RecordId(3))),
            SyncFlags::CELL_PUBLIC,
        );
        assert!(matches!(
            reg.register(b),
            Err(SchemaError::UnknownRecord(_))
        ));
        let mut b = EntityTypeBuilder::new("W");
        for i in 0..=PROPS_PER_TYPE_MAX {
            b = b.prop(
                &format!("p{i}"),
                PropType::Scalar(ScalarType::Int),
                SyncFlags::CELL_PUBLIC,
            );
        }
        assert!(matches!(reg.register(b), Err(SchemaError::TooMany(_))));
    }

    #[test]
    fn detail_levels_are_checked_and_masked() {
        let reg = TypeRegistry::with_builtins();
        let avatar = reg.get(AVATAR).expect("avatar");
        let hp = avatar.prop_index("hp").expect("hp");
        let buffs = avatar.prop_index("buffs").expect("buffs");
        assert_eq!(avatar.detail_mask(), 1 << hp | 1 << buffs);
        assert_eq!(avatar.props()[hp].detail, Some(Detail::Band(1)));
        let int = PropType::Scalar(ScalarType::Int);
        let mut reg = TypeRegistry::new();
        let bad = [
            ("hidden", SyncFlags::CELL_PUBLIC_AND_OWN, Detail::Band(0)),
            (
                "band",
                SyncFlags::ALL_CLIENTS,
                Detail::Band(DETAIL_BANDS_MAX),
            ),
            ("metres", SyncFlags::OTHER_CLIENTS, Detail::WithinM(0.0)),
            ("nan", SyncFlags::OTHER_CLIENTS, Detail::WithinM(f32::NAN)),
        ];
        for (i, (name, flags, d)) in bad.into_iter().enumerate() {
            let b = EntityTypeBuilder::new(&format!("T{i}"))
                .prop(name, int, flags)
                .detail(name, d);
            assert_eq!(reg.register(b), Err(SchemaError::BadDetail(name.into())));
        }
        let b = EntityTypeBuilder::new("U").detail("nothing", Detail::Band(0));
        assert_eq!(
            reg.register(b),
            Err(SchemaError::BadDetail("nothing".into()))
        );
        let b = EntityTypeBuilder::new("V")
            .prop("a", int, SyncFlags::OTHER_CLIENTS)
            .detail("a", Detail::WithinM(20.0));
        let v = reg.register(b).expect("valid");
        assert_eq!(reg.get(v).expect("v").detail_mask(), 1);
    }
}
